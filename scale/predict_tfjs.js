// Loads a Keras 3 model converted back by tensorflowjs_converter (--input_format keras_keras)
// with the package's loadKerasModel, predicts on the inputs of io.json and prints the largest
// absolute difference from the Keras outputs recorded there as JSON ({"maxAbsError": ...}).
// Run after `npm run build`: node scale/predict_tfjs.js <tfjs folder> <io.json> [backend]
const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');
require('@tensorflow/tfjs-backend-wasm');
const A = require(path.join(__dirname, '..', 'dist', 'index.cjs'));

const toTensor = (t) =>
  tf.tensor(
    t.data.map((v) => (typeof v === 'boolean' ? Number(v) : v)),
    t.shape,
    t.dtype === 'bool' ? 'bool' : t.dtype.startsWith('int') ? 'int32' : 'float32',
  );

async function main() {
  const [dir, ioPath, backend = 'cpu'] = process.argv.slice(2);
  await tf.setBackend(backend);
  const io = JSON.parse(fs.readFileSync(ioPath, 'utf8'));
  const model = await A.loadKerasModel(dir);
  const inputs = io.inputs.map(toTensor);
  let out = model.predict(inputs.length === 1 ? inputs[0] : inputs);
  if (!Array.isArray(out)) out = [out];
  let worst = 0;
  out.forEach((o, i) => {
    const want = io.outputs[i].data;
    o.dataSync().forEach((v, j) => (worst = Math.max(worst, Math.abs(v - want[j]))));
  });
  console.log(JSON.stringify({backend, maxAbsError: worst}));
}
main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
