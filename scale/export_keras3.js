// Saves a model folder written by tfjs-attention as a Keras 3 export (toKeras3Artifacts, valid
// lengths as an attention-mask input) that scale/keras3_io.py packs into a .keras file.
// Run after `npm run build`: node scale/export_keras3.js <model folder> <out folder>
const path = require('path');
const tf = require('@tensorflow/tfjs');
const A = require(path.join(__dirname, '..', 'dist', 'index.cjs'));

async function main() {
  const [src, out] = process.argv.slice(2);
  if (!src || !out)
    throw new Error('usage: node scale/export_keras3.js <model folder> <out folder>');
  await tf.setBackend('cpu');
  const model = await tf.loadLayersModel(A.fileSystem(src));
  await model.save(
    tf.io.withSaveHandler(async (a) =>
      A.fileSystem(out).save(await A.toKeras3Artifacts(a, {validLens: 'mask'})),
    ),
  );
  console.log(`wrote ${out}`);
}
main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
