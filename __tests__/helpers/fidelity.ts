/**
 * Collects the max absolute error of every fidelity case into reports/fidelity.json (one file per
 * test file and backend), from which scripts/fidelity_table.mjs writes the table in docs/fidelity.md.
 */
import * as fs from 'fs';
import * as path from 'path';

export interface FidelityRow {
  case: string;
  reference: string;
  backend: string;
  maxAbsError: number;
}

const dir = path.resolve(__dirname, '..', '..', 'reports', 'fidelity');

export function recordFidelity(row: FidelityRow): void {
  fs.mkdirSync(dir, {recursive: true});
  const file = path.join(dir, `${row.case}.${row.backend}.json`);
  fs.writeFileSync(file, JSON.stringify(row));
}
