// A small text classifier: token embedding + MultiHeadAttention over the valid tokens (lengths
// input) + pooling. Task: does the sequence contain token 1? Trains in a few seconds.
// Run: npm run build && node examples/text_classifier.js
const tf = require('@tensorflow/tfjs');
const {MultiHeadAttention, TokenAndPositionEmbedding} = require('tfjs-attention');

const VOCAB = 20;
const MAX_LEN = 12;

function data(n) {
  const tokens = [];
  const lengths = [];
  const labels = [];
  for (let i = 0; i < n; i++) {
    const len = 2 + Math.floor(Math.random() * (MAX_LEN - 1));
    const row = Array.from({length: MAX_LEN}, (_, t) =>
      t < len ? 2 + Math.floor(Math.random() * (VOCAB - 2)) : 0,
    );
    const positive = Math.random() < 0.5;
    if (positive) row[Math.floor(Math.random() * len)] = 1;
    // a 1 after the length is padding and must not count
    if (len < MAX_LEN && Math.random() < 0.5) row[MAX_LEN - 1] = 1;
    tokens.push(row);
    lengths.push(len);
    labels.push(positive ? 1 : 0);
  }
  return [
    tf.tensor2d(tokens, [n, MAX_LEN], 'int32'),
    tf.tensor1d(lengths, 'int32'),
    tf.tensor2d(labels, [n, 1]),
  ];
}

async function main() {
  const tokens = tf.input({shape: [MAX_LEN], dtype: 'int32'});
  const lengths = tf.input({shape: [1], dtype: 'int32'});
  const x = new TokenAndPositionEmbedding({
    vocabularySize: VOCAB,
    sequenceLength: MAX_LEN,
    embeddingDim: 16,
  }).apply(tokens);
  const h = new MultiHeadAttention({numHeads: 2, keyDim: 8}).apply([x, lengths]);
  const pooled = tf.layers
    .globalMaxPooling1d()
    .apply(tf.layers.dense({units: 16, activation: 'relu'}).apply(h));
  const prob = tf.layers.dense({units: 1, activation: 'sigmoid'}).apply(pooled);
  const model = tf.model({inputs: [tokens, lengths], outputs: prob});
  model.compile({
    optimizer: tf.train.adam(0.01),
    loss: 'binaryCrossentropy',
    metrics: ['accuracy'],
  });
  const [xs, ls, ys] = data(2000);
  await model.fit([xs, ls], ys, {epochs: 8, batchSize: 64, verbose: 0});
  const [tx, tl, ty] = data(500);
  const [, acc] = model.evaluate([tx, tl], ty);
  const accuracy = acc.dataSync()[0];
  console.log(`test accuracy ${(100 * accuracy).toFixed(1)}%`);
  if (accuracy < 0.9) throw new Error('the classifier did not learn');
  console.log('ok');
}
main();
