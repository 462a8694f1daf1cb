// Preloaded (node -r) by train/cli.test.ts: require("@tensorflow/tfjs") fails as if it were not
// installed, as in a project that has only the peer dependencies tfjs-core and tfjs-layers.
const Module = require('module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === '@tensorflow/tfjs') {
    const e = new Error(`Cannot find module '${request}'`);
    e.code = 'MODULE_NOT_FOUND';
    throw e;
  }
  return resolve.call(this, request, ...rest);
};
