// A minimal transformer encoder block, x + MHA(x) and x + FFN(x) with layer normalization,
// written once with mha.apply(x) and once Keras-style with mha.apply([x, x]).
// Run: npm run build && node examples/transformer_encoder.js
const tf = require('@tensorflow/tfjs');
const {MultiHeadAttention} = require('tfjs-attention');

function encoderBlock(x, {width, heads, ffn, keras}) {
  const mha = new MultiHeadAttention({numHeads: heads, keyDim: width / heads, dropout: 0.1});
  const att = mha.apply(keras ? [x, x] : x);
  const h = tf.layers.layerNormalization().apply(tf.layers.add().apply([x, att]));
  const f = tf.layers
    .dense({units: width})
    .apply(tf.layers.dense({units: ffn, activation: 'relu'}).apply(h));
  return tf.layers.layerNormalization().apply(tf.layers.add().apply([h, f]));
}

async function main() {
  for (const keras of [false, true]) {
    const x = tf.input({shape: [8, 16]});
    const y = encoderBlock(encoderBlock(x, {width: 16, heads: 4, ffn: 32, keras}), {
      width: 16,
      heads: 4,
      ffn: 32,
      keras,
    });
    const model = tf.model({inputs: x, outputs: y});
    model.compile({optimizer: 'adam', loss: 'meanSquaredError'});
    const xs = tf.randomNormal([32, 8, 16]);
    const h = await model.fit(xs, tf.reverse(xs, 1), {epochs: 5, verbose: 0});
    const loss = h.history.loss;
    console.log(
      `${keras ? 'apply([x, x])' : 'apply(x)'}: loss ${loss[0].toFixed(3)} -> ${loss[loss.length - 1].toFixed(3)}`,
    );
    if (!(loss[loss.length - 1] < loss[0])) throw new Error('the encoder did not train');
  }
  console.log('ok');
}
main();
