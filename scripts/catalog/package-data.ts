// Reads the installed @pydantic/genai-prices: its bundled provider data (what `waitForUpdate`
// resolves to when nothing was fetched, which this code never asks for) and its version.
import { readFileSync } from 'node:fs';
import { waitForUpdate, type Provider } from '@pydantic/genai-prices';
import { PACKAGE_NAME } from './generate.ts';

export interface PackageData {
  readonly version: string;
  /** Its licence and copyright line, which the generated file carries (MIT asks for the notice). */
  readonly license: string;
  readonly providers: readonly Provider[];
}

export async function readInstalledPackage(): Promise<PackageData> {
  const providers = await waitForUpdate();
  if (providers === null) throw new Error(`${PACKAGE_NAME} returned no bundled data`);
  // The package's exports do not include package.json; it sits two levels above dist/index.js.
  const root = new URL('../', import.meta.resolve(PACKAGE_NAME));
  const manifest = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { version?: unknown; license?: unknown };
  if (typeof manifest.version !== 'string' || typeof manifest.license !== 'string') {
    throw new Error(`${PACKAGE_NAME}: no version or license in its package.json`);
  }
  const copyright = readFileSync(new URL('LICENSE', root), 'utf8')
    .split('\n')
    .find((line) => line.startsWith('Copyright'));
  if (copyright === undefined) throw new Error(`${PACKAGE_NAME}: no copyright line in its LICENSE`);
  return { version: manifest.version, license: `${manifest.license}, ${copyright.trim()}`, providers };
}
