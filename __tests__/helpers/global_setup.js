// Builds dist/ once before the suites that run the built package and the training script.
const {execFileSync} = require('child_process');
const path = require('path');

module.exports = async () => {
  execFileSync(process.execPath, ['scripts/build.mjs'], {
    cwd: path.resolve(__dirname, '../..'),
    stdio: 'inherit',
  });
};
