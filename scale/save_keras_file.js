// Writes .keras files with the package's saveKerasFile (dist/index.cjs: `npm run build` first)
// and the package's own predictions, for scale/test_save_keras_file.py, which loads each file in
// Keras 3 and compares. Usage: node scale/save_keras_file.js <out folder>
// <out>/<name>.keras and <out>/<name>.json ({ids, predictions}) for:
//   decoder_lm: TokenAndPositionEmbedding, TransformerDecoder, a causal MultiHeadAttention, Dense
//   int8: Embedding, Dense and EinsumDense after quantize(model, 'int8') (Keras' int8 scheme)
const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');
const api = require('../dist/index.cjs');

const IDS = [
  [1, 2, 3, 4, 5, 6],
  [7, 8, 9, 1, 2, 3],
];

function seeded(m, seed) {
  m.setWeights(m.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 0.4, 'float32', seed + i)));
  return m;
}

function decoderLm() {
  const ids = tf.input({shape: [null], dtype: 'int32', name: 'ids'});
  let x = new api.TokenAndPositionEmbedding({
    vocabularySize: 20,
    sequenceLength: 8,
    embeddingDim: 8,
    name: 'embed',
  }).apply(ids);
  x = new api.TransformerDecoder({intermediateDim: 16, numHeads: 2, name: 'decoder'}).apply(x);
  x = new api.MultiHeadAttention({numHeads: 2, keyDim: 4, useCausalMask: true, name: 'mha'}).apply(
    x,
  );
  const logits = tf.layers.dense({units: 5, name: 'logits'}).apply(x);
  return seeded(tf.model({inputs: ids, outputs: logits}), 3);
}

function int8Model() {
  const ids = tf.input({shape: [null], dtype: 'int32', name: 'ids'});
  let x = tf.layers.embedding({inputDim: 20, outputDim: 8, name: 'embed'}).apply(ids);
  x = tf.layers.dense({units: 12, activation: 'relu', name: 'dense'}).apply(x);
  x = new api.EinsumDense({
    equation: 'btd,dh->bth',
    outputShape: [null, 6],
    biasAxes: 'h',
    name: 'proj',
  }).apply(x);
  const float = seeded(tf.model({inputs: ids, outputs: x}), 7);
  return api.quantize(float, 'int8');
}

async function main() {
  const out = process.argv[2];
  if (!out) throw new Error('usage: node scale/save_keras_file.js <out folder>');
  fs.mkdirSync(out, {recursive: true});
  await tf.setBackend('cpu');
  for (const [name, make] of [
    ['decoder_lm', decoderLm],
    ['int8', int8Model],
  ]) {
    const model = await make();
    await api.saveKerasFile(model, path.join(out, `${name}.keras`));
    const x = tf.tensor2d(IDS, undefined, 'int32');
    const predictions = model.predict(x).arraySync();
    fs.writeFileSync(path.join(out, `${name}.json`), JSON.stringify({ids: IDS, predictions}));
    x.dispose();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
