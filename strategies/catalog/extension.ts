// The models catalog as an extension: it has no section of its own (models.json is its file,
// daemon/config.ts reads it); it is listed so that `albedo extensions` shows it and it can be
// switched off.
import type { ExtensionModule } from '../extensions/module.ts';

export const modelsExtension = {
  name: 'models',
  kind: 'catalog',
  defaultEnabled: true,
  requires: [],
  description: 'context windows and image input of known models, from the shipped list and models.json',
} as const satisfies ExtensionModule;
