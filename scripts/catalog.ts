// `npm run catalog [-- --as-of YYYY-MM-DD]`: regenerates strategies/catalog/models.json from the
// installed @pydantic/genai-prices and scripts/catalog/facts.ts (prices as of the given day,
// today in UTC by default), and lists the package's models it left out. Run it after updating
// the package; the catalog test fails until the shipped file matches.
import { writeFileSync } from 'node:fs';
import { generateCatalog, serializeCatalog } from './catalog/generate.ts';
import { readInstalledPackage } from './catalog/package-data.ts';

const target = new URL('../strategies/catalog/models.json', import.meta.url);

async function main(): Promise<void> {
  const flag = process.argv.indexOf('--as-of');
  const asOf = flag === -1 ? new Date().toISOString().slice(0, 10) : process.argv[flag + 1];
  if (asOf === undefined || !/^\d{4}-\d{2}-\d{2}$/.test(asOf)) {
    process.stderr.write('usage: npm run catalog [-- --as-of YYYY-MM-DD]\n');
    process.exit(2);
  }
  const pkg = await readInstalledPackage();
  const { file, skipped } = generateCatalog(pkg.providers, { version: pkg.version, license: pkg.license, pricesAsOf: asOf });
  writeFileSync(target, serializeCatalog(file));
  for (const s of skipped) process.stderr.write(`skipped ${s.id}: ${s.reason}\n`);
  process.stdout.write(
    `wrote strategies/catalog/models.json: ${file.models.length} models, ${Object.keys(file.aliases).length} aliases, ` +
      `${file.source.package} ${file.source.version}, prices as of ${asOf}\n`,
  );
}

await main();
