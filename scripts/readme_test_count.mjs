// Keeps README.md's test count and time honest: `node scripts/readme_test_count.mjs <jest.json>
// [README.md]` compares the sentence "About N tests in about M minutes on 2 cores" (README's
// Development section) with a jest run's JSON report (`jest --json --outputFile=<jest.json>`, as
// .ci/run writes it). The count must be within 10 % of the run's (exit 1 when it is not); a time
// outside half to twice the run's wall time is printed as a warning only, since a loaded machine
// is slower without the README being wrong. Exits 2 when it cannot check.
import {readFileSync} from 'node:fs';
import {dirname, join} from 'node:path';
import {fileURLToPath} from 'node:url';

const CLAIM = /About ([\d,]+) tests in about (\d+) minutes on 2 cores/;

/** README's claim: {tests, minutes}, or null when the sentence is missing. */
export function readmeClaim(text) {
  const m = CLAIM.exec(text);
  return m ? {tests: Number(m[1].replace(/,/g, '')), minutes: Number(m[2])} : null;
}

/** What a jest JSON report measured: {tests, minutes} (wall time, first start to last end). */
export function measured(report) {
  const ends = report.testResults.map((r) => r.endTime).filter(Number.isFinite);
  const end = ends.length > 0 ? Math.max(...ends) : report.startTime;
  return {tests: report.numTotalTests, minutes: (end - report.startTime) / 60000};
}

/** The reasons README's claim does not match the run ([] when it does). */
export function mismatches(claim, run) {
  const out = [];
  if (Math.abs(run.tests - claim.tests) > 0.1 * claim.tests) {
    out.push(`the count: README says about ${claim.tests}, the run had ${run.tests}`);
  }
  if (run.minutes < claim.minutes / 2 || run.minutes > claim.minutes * 2) {
    out.push(
      `the time: README says about ${claim.minutes} minutes, the run took ` +
        `${run.minutes.toFixed(1)}`,
    );
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [reportFile, readmeFile] = process.argv.slice(2);
  const readme = readmeFile ?? join(dirname(fileURLToPath(import.meta.url)), '..', 'README.md');
  if (reportFile === undefined) {
    console.error('usage: node scripts/readme_test_count.mjs <jest.json> [README.md]');
    process.exit(2);
  }
  const claim = readmeClaim(readFileSync(readme, 'utf8'));
  if (claim === null) {
    console.error(`${readme}: expected a sentence "About N tests in about M minutes on 2 cores"`);
    process.exit(2);
  }
  const run = measured(JSON.parse(readFileSync(reportFile, 'utf8')));
  const bad = mismatches(claim, run);
  const count = bad.filter((b) => b.startsWith('the count'));
  console.log(
    `README: about ${claim.tests} tests in about ${claim.minutes} minutes; ` +
      `this run: ${run.tests} tests in ${run.minutes.toFixed(1)} minutes` +
      (bad.length > 0 ? `: README.md is off in ${bad.join('; ')}` : '') +
      (bad.length > count.length ? ' (the time is a warning: a loaded machine runs slower)' : ''),
  );
  process.exit(count.length > 0 ? 1 : 0);
}
