// Run by __tests__/kernels/wasm_kernels_memory_limit.test.ts under `ulimit -v`: imports the built
// package, computes Keras' Attention on the cpu backend and prints what it found as JSON.
const path = require('path');

const root = path.resolve(__dirname, '../..');
const tf = require(require.resolve('@tensorflow/tfjs', {paths: [root]}));
const {Attention, simdKernelsReady} = require(path.join(root, 'dist/index.cjs'));

let memoryLimited = false;
try {
  new globalThis.WebAssembly.Memory({initial: 1});
} catch {
  memoryLimited = true; // the condition under test: no WebAssembly memory can be reserved
}

async function main() {
  await tf.setBackend('cpu');
  const ready = await simdKernelsReady();
  const [query, value] = JSON.parse(process.argv[2]);
  const out = new Attention().apply([tf.tensor(query), tf.tensor(value)]);
  const output = await out.array();
  // a rejection left unhandled would end the process with code 1 once this turn is over
  await new Promise((resolve) => setTimeout(resolve, 100));
  process.stdout.write(JSON.stringify({memoryLimited, ready, backend: tf.getBackend(), output}));
}

main();
