// A static file server for the browser tests, on 127.0.0.1 only, serving the test page, the
// built bundle, tfjs' browser build, its webgpu backend and the committed addition model.
const http = require('http');
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const ROUTES = {
  '/': path.join(__dirname, 'index.html'),
  '/scenarios.js': path.join(__dirname, 'scenarios.js'),
  '/tfjs-attention.min.js': path.join(root, 'dist', 'tfjs-attention.min.js'),
  // the Keras file readers' libraries, which the bundle imports on first use
  '/tfjs-attention-fflate.mjs': path.join(root, 'dist', 'tfjs-attention-fflate.mjs'),
  '/tfjs-attention-jsfive.mjs': path.join(root, 'dist', 'tfjs-attention-jsfive.mjs'),
  '/tf.min.js': path.join(root, 'node_modules', '@tensorflow', 'tfjs', 'dist', 'tf.min.js'),
  '/tf-backend-webgpu.min.js': path.join(
    root,
    'node_modules',
    '@tensorflow',
    'tfjs-backend-webgpu',
    'dist',
    'tf-backend-webgpu.min.js',
  ),
  // the committed generation model, loaded with tf.loadLayersModel over http
  '/models/addition/model.json': path.join(root, 'models', 'addition', 'model.json'),
  '/models/addition/weights.bin': path.join(root, 'models', 'addition', 'weights.bin'),
};
const TYPES = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.json': 'application/json',
};

/**
 * Starts the server on a free port; resolves to {url, close}. `routes` (URL path -> file) replaces
 * the default routes, e.g. for a page and the app bundle built by a test.
 */
function start(routes = ROUTES) {
  const server = http.createServer((req, res) => {
    let pathname;
    try {
      pathname = new URL(req.url ?? '', 'http://127.0.0.1').pathname;
    } catch {
      res.writeHead(400).end('bad request target'); // e.g. `http://[/`: never a crash
      return;
    }
    const file = Object.prototype.hasOwnProperty.call(routes, pathname)
      ? routes[pathname]
      : undefined;
    if (file === undefined || !fs.existsSync(file)) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, {'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream'});
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address();
      resolve({url: `http://127.0.0.1:${port}/`, close: () => new Promise((r) => server.close(r))});
    });
  });
}

module.exports = {start, ROUTES};
