// The notes layer: its settings section and the factory the engine builds it with per request.
import type { ExtensionModule } from '../extensions/module.ts';
import { notesLayer } from './notes.ts';
import { NotesSettings } from './settings.ts';

export const notesExtension = {
  name: 'notes',
  kind: 'layer',
  defaultEnabled: true,
  requires: [],
  description: 'session notes rewritten at every compaction and sent at the top of each request',
  settings: NotesSettings,
  layer: (section) => notesLayer(NotesSettings.parse(section ?? {})),
  tables: ['compaction_notes'],
} as const satisfies ExtensionModule;
