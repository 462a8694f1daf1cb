// The Chromium the browser tests drive with playwright-core, found in one place: CHROMIUM_PATH
// when set, else the first of chromium, chromium-browser, google-chrome, google-chrome-stable on
// PATH. `node browser/chromium.js` prints the binary it would use, or says what is missing and
// exits 1; jest.browser.config.js runs the same check before anything else.
const {execFileSync} = require('child_process');
const fs = require('fs');
const path = require('path');

const NAMES = ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable'];

// SwiftShader for WebGL2 and WebGPU (no GPU needed); the pages are on 127.0.0.1, a secure context.
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--use-angle=swiftshader',
  '--enable-unsafe-swiftshader',
  '--enable-unsafe-webgpu',
  '--use-webgpu-adapter=swiftshader',
  '--disable-background-networking',
  '--disable-component-update',
];

const HOW =
  'Install it (Debian/Ubuntu: apt-get install chromium), or set CHROMIUM_PATH to a Chromium or ' +
  'Chrome binary, e.g. CHROMIUM_PATH=/path/to/chrome npm run test:browser';

function isExecutable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The binary to launch, or {error} saying what is missing and how to get it. */
function findChromium(env = process.env) {
  let file;
  if (env.CHROMIUM_PATH) {
    if (!isExecutable(env.CHROMIUM_PATH)) {
      return {
        error: `The browser tests need Chromium: CHROMIUM_PATH=${env.CHROMIUM_PATH} is not an executable file.\n${HOW}`,
      };
    }
    file = env.CHROMIUM_PATH;
  } else {
    const dirs = (env.PATH ?? '').split(path.delimiter).filter(Boolean);
    file = NAMES.flatMap((n) => dirs.map((d) => path.join(d, n))).find(isExecutable);
    if (file === undefined) {
      return {
        error: `The browser tests need Chromium: CHROMIUM_PATH is not set and none of ${NAMES.join(', ')} is on PATH.\n${HOW}`,
      };
    }
  }
  try {
    execFileSync(file, ['--version'], {stdio: 'ignore', timeout: 30000});
  } catch (e) {
    return {
      error: `The browser tests need Chromium: ${file} --version failed (${e.message.split('\n')[0]}).\n${HOW}`,
    };
  }
  return {path: file};
}

/** The binary to launch; throws the message of findChromium when there is none. */
function chromiumPath() {
  const found = findChromium();
  if (found.error !== undefined) throw new Error(found.error);
  return found.path;
}

/** Headless Chromium through playwright-core, with the tests' flags. */
function launchChromium(args = CHROMIUM_ARGS) {
  const {chromium} = require('playwright-core');
  return chromium.launch({executablePath: chromiumPath(), args});
}

module.exports = {CHROMIUM_ARGS, findChromium, chromiumPath, launchChromium};

if (require.main === module) {
  const found = findChromium();
  if (found.error !== undefined) {
    console.error(found.error);
    process.exit(1);
  }
  console.log(found.path);
}
