// jest's node environment with the host realm's typed arrays and ArrayBuffer. tfjs-node's
// native addon creates its arrays in the host realm; without this, tfjs' `instanceof
// Float32Array` checks fail inside jest's sandbox ("Unsupported TypedArray subtype"), which never
// happens in plain Node.
const {TestEnvironment} = require('jest-environment-node');

const SHARED = [
  'ArrayBuffer',
  'Float32Array',
  'Float64Array',
  'Int32Array',
  'Uint8Array',
  'Uint8ClampedArray',
  'Int8Array',
  'Int16Array',
  'Uint16Array',
  'Uint32Array',
];

class HostTypedArrayEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    for (const name of SHARED) this.global[name] = globalThis[name];
  }
}

module.exports = HostTypedArrayEnvironment;
