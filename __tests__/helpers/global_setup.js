// Builds dist/ once before the suites that run the built package and the training script, unless
// dist/ was built from the sources as they are now (scripts/build_inputs.mjs: `npm run build`
// just before `npm test`, as .ci/run runs them, builds once).
const {execFileSync} = require('child_process');
const path = require('path');

module.exports = async () => {
  const root = path.resolve(__dirname, '../..');
  const {builtFromCurrentInputs} = await import('../../scripts/build_inputs.mjs');
  if (builtFromCurrentInputs(root)) return;
  execFileSync(process.execPath, ['scripts/build.mjs'], {cwd: root, stdio: 'inherit'});
};
