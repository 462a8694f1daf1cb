// What dist/ is built from, and whether it is built from what is here now: scripts/build.mjs
// writes the inputs' hash to dist/.inputs.sha256 as its last step, and jest's globalSetup
// (__tests__/helpers/global_setup.js) builds again only when that file is missing or differs, so
// `npm run build && npm test` (as .ci/run runs them) builds once.
import {createHash} from 'node:crypto';
import {existsSync, readFileSync, readdirSync, statSync} from 'node:fs';
import {join, relative} from 'node:path';

/** The files and folders dist/ is built from, relative to the package's root. */
export const BUILD_INPUTS = [
  'src',
  'scripts/build.mjs',
  'scripts/build_inputs.mjs',
  'tsconfig.json',
  'tsconfig.build.json',
  'package.json',
  'package-lock.json',
];

/** Where the build writes the hash of its inputs, relative to the package's root. */
export const BUILD_STAMP = 'dist/.inputs.sha256';

function files(root, rel) {
  const full = join(root, rel);
  if (!existsSync(full)) return [];
  if (!statSync(full).isDirectory()) return [rel];
  return readdirSync(full)
    .sort()
    .flatMap((name) => files(root, join(rel, name)));
}

/** The SHA-256 of the inputs' paths and contents under `root` (hex). */
export function buildInputsHash(root) {
  const hash = createHash('sha256');
  for (const rel of BUILD_INPUTS.flatMap((input) => files(root, input))) {
    const bytes = readFileSync(join(root, rel));
    hash.update(`${relative(root, join(root, rel))}\0${bytes.length}\0`);
    hash.update(bytes);
  }
  return hash.digest('hex');
}

/** Whether `root`'s dist/ was built from the inputs as they are now. */
export function builtFromCurrentInputs(root) {
  const stamp = join(root, BUILD_STAMP);
  return existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === buildInputsHash(root);
}
