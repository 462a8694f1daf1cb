// Writes the fidelity table of docs/fidelity.md from the errors the fidelity tests recorded in
// reports/fidelity/ (run `npm test` first): one row per case, the worst error over backends.
import {readdirSync, readFileSync, writeFileSync} from 'node:fs';

const dir = 'reports/fidelity';
const rows = new Map();
for (const f of readdirSync(dir)) {
  const r = JSON.parse(readFileSync(`${dir}/${f}`, 'utf8'));
  const row = rows.get(r.case) ?? {reference: r.reference, backends: new Set(), worst: 0};
  row.backends.add(r.backend);
  row.worst = Math.max(row.worst, r.maxAbsError);
  rows.set(r.case, row);
}
const lines = [
  '| case | reference | backends | max abs error |',
  '| --- | --- | --- | --- |',
  ...[...rows.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(
      ([name, r]) =>
        `| \`${name}\` | ${r.reference} | ${[...r.backends].sort().join(', ')} | ${r.worst.toExponential(1)} |`,
    ),
];
const readme = readFileSync('docs/fidelity.md', 'utf8');
const start = '<!-- fidelity:start -->';
const end = '<!-- fidelity:end -->';
const i = readme.indexOf(start);
const j = readme.indexOf(end);
if (i < 0 || j < 0) throw new Error('docs/fidelity.md has no fidelity markers');
writeFileSync(
  'docs/fidelity.md',
  `${readme.slice(0, i + start.length)}\n${lines.join('\n')}\n${readme.slice(j)}`,
);
console.log(`wrote ${rows.size} rows`);
