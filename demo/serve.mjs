// The demo page (npm run demo): a static server on 127.0.0.1 for demo/, the browser bundle
// dist/tfjs-attention.min.js, tfjs and its backends from node_modules, and the committed models.
// Port from --port N or PORT (default 8080; 0 picks a free port). Builds dist/ first if the
// bundle is missing.
import {execFileSync} from 'node:child_process';
import {createReadStream, existsSync} from 'node:fs';
import {createServer} from 'node:http';
import {dirname, extname, join, resolve} from 'node:path';
import {pipeline} from 'node:stream';
import {fileURLToPath} from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const tfjs = (pkg, file) => join(root, 'node_modules', '@tensorflow', pkg, 'dist', file);
const bundle = join(root, 'dist', 'tfjs-attention.min.js');

const ROUTES = {
  '/': join(here, 'index.html'),
  '/demo.js': join(here, 'demo.js'),
  '/tfjs-attention.min.js': bundle,
  // the Keras file readers' libraries, which the bundle imports on first use
  '/tfjs-attention-fflate.mjs': join(root, 'dist', 'tfjs-attention-fflate.mjs'),
  '/tfjs-attention-jsfive.mjs': join(root, 'dist', 'tfjs-attention-jsfive.mjs'),
  '/tf.min.js': tfjs('tfjs', 'tf.min.js'),
  '/tf-backend-webgpu.min.js': tfjs('tfjs-backend-webgpu', 'tf-backend-webgpu.min.js'),
  '/tf-backend-wasm.min.js': tfjs('tfjs-backend-wasm', 'tf-backend-wasm.min.js'),
};
for (const f of ['', '-simd', '-threaded-simd']) {
  ROUTES[`/wasm/tfjs-backend-wasm${f}.wasm`] = tfjs(
    'tfjs-backend-wasm',
    `tfjs-backend-wasm${f}.wasm`,
  );
}
// the page links to the package's README and its own documentation
ROUTES['/README.md'] = join(root, 'README.md');
ROUTES['/docs/demo.md'] = join(root, 'docs', 'demo.md');
for (const model of ['reverse', 'lookup', 'addition']) {
  for (const file of ['model.json', 'weights.bin']) {
    ROUTES[`/models/${model}/${file}`] = join(root, 'models', model, file);
  }
}
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.md': 'text/plain; charset=utf-8',
};

function portFromArgs(argv, env) {
  const i = argv.indexOf('--port');
  const eq = argv.find((a) => a.startsWith('--port='));
  const raw = i >= 0 ? argv[i + 1] : eq ? eq.slice('--port='.length) : (env.PORT ?? '8080');
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`expected a port number from 0 to 65535, received ${JSON.stringify(raw)}`);
  }
  return port;
}

if (!existsSync(bundle)) {
  console.log('dist/tfjs-attention.min.js is missing: building it (npm run build)');
  execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], {
    cwd: root,
    stdio: 'inherit',
  });
}

let port;
try {
  port = portFromArgs(process.argv.slice(2), process.env);
} catch (e) {
  console.error(`demo: ${e.message}`);
  process.exit(2);
}

/** The file a request target names, or null when the target is not a URL at all. */
function fileFor(target) {
  let pathname;
  try {
    pathname = new URL(target ?? '', 'http://127.0.0.1').pathname;
  } catch {
    return null; // e.g. "http://[/": an absolute URL with a malformed host
  }
  return Object.hasOwn(ROUTES, pathname) ? ROUTES[pathname] : undefined;
}

function reply(res, status, text) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, {'content-type': 'text/plain; charset=utf-8'}).end(text);
}

// No request may take the server down: a target that is not a URL gets 400, an unknown path 404,
// a file that cannot be read 500 (or a cut response), and nothing escapes as an exception.
const server = createServer((req, res) => {
  try {
    const file = fileFor(req.url);
    if (file === null) {
      reply(
        res,
        400,
        `bad request target: expected a path such as /, received ${JSON.stringify(req.url)}`,
      );
      return;
    }
    if (file === undefined || !existsSync(file)) {
      reply(res, 404, 'not found');
      return;
    }
    const stream = createReadStream(file);
    // an error before the file opened gets a 500; once piping, pipeline owns both ends
    const openFailed = (e) => reply(res, 500, `cannot read ${req.url}: ${e.message}`);
    stream.once('error', openFailed);
    // a client that goes away before the response ends must not keep the file open
    res.once('close', () => stream.destroy());
    stream.once('open', () => {
      stream.off('error', openFailed);
      res.writeHead(200, {
        'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
        'cache-control': 'no-cache',
      });
      // pipeline destroys the file stream when the response closes early (a dropped client),
      // so no download leaves a descriptor behind; a read error cuts the response
      pipeline(stream, res, () => {});
    });
  } catch (e) {
    console.error(`demo: ${req.method} ${req.url}: ${e.message}`);
    reply(res, 500, 'internal error');
  }
});
server.on('error', (e) => {
  console.error(`demo: cannot listen on 127.0.0.1:${port}: ${e.message}`);
  process.exit(1);
});
server.listen(port, '127.0.0.1', () => {
  console.log(`tfjs-attention demo at http://127.0.0.1:${server.address().port}/`);
});
