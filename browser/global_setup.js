// globalSetup of jest.browser.config.js: says at once when there is no Chromium to drive (instead
// of every suite failing in playwright), then builds dist/ as the Node suites' globalSetup does.
const {findChromium} = require('./chromium.js');
const buildDist = require('../__tests__/helpers/global_setup.js');

module.exports = async () => {
  const found = findChromium();
  if (found.error !== undefined) {
    const err = new Error(found.error);
    err.stack = found.error; // the message alone, no stack trace of this file
    throw err;
  }
  await buildDist();
};
