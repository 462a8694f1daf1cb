// Each layer in a tf.sequential model and in a functional model.
// Run: npm run build && node examples/add_layers.js
const tf = require('@tensorflow/tfjs');
const {
  MultiHeadAttention,
  DotProductAttention,
  Attention,
  AdditiveAttention,
  EinsumDense,
} = require('tfjs-attention');

// Sequential: layers with one input work as self-attention.
const seq = tf.sequential({
  layers: [
    tf.layers.dense({units: 16, inputShape: [6, 4]}),
    new MultiHeadAttention({numHeads: 2, keyDim: 8}),
    new DotProductAttention(),
    new Attention({useScale: true}),
    new AdditiveAttention(),
    new EinsumDense({equation: 'abc,cd->abd', outputShape: [null, 3], biasAxes: 'd'}),
  ],
});
console.log('sequential output', seq.predict(tf.ones([2, 6, 4])).shape);

// Functional: cross-attention from queries to a padded memory, with lengths as an input.
const queries = tf.input({shape: [3, 8]});
const memory = tf.input({shape: [5, 8]});
const lengths = tf.input({shape: [1], dtype: 'int32'});
const mha = new MultiHeadAttention({numHeads: 2, keyDim: 4}).apply([queries, memory, lengths]);
const additive = new AdditiveAttention({numHiddens: 8}).apply([queries, memory, lengths]);
const luong = new Attention({scoreMode: 'concat'}).apply([queries, memory, lengths]);
const merged = tf.layers.concatenate().apply([mha, additive, luong]);
const model = tf.model({inputs: [queries, memory, lengths], outputs: merged});
const out = model.predict([tf.ones([2, 3, 8]), tf.ones([2, 5, 8]), tf.tensor1d([5, 2], 'int32')]);
console.log('functional output', out.shape);
console.log('ok');
