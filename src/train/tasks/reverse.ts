/**
 * Task `reverse`: read a sequence of 1..maxLen tokens padded to maxLen and emit it reversed.
 *
 * Model contract (stored in the model's userDefinedMetadata):
 * - inputs `[tokens int32 [batch, maxLen], lengths int32 [batch]]` (a `[batch]` tensor or `[batch, 1]`);
 *   tokens are `1..vocabSize-1` at valid positions and `padId` after them;
 * - output `[batch, maxLen, vocabSize]` probabilities; at position `t < length` the argmax is
 *   `tokens[length - 1 - t]` (positions after the length predict `padId`).
 *
 * Two transformer blocks with MultiHeadAttention and valid-length masking: the first finds the
 * length, the second attends to position `length - 1 - t` (the anti-diagonal of its heatmap).
 */
import type * as tfTypes from '@tensorflow/tfjs';

import {MultiHeadAttention} from '../../layers/attention/multi_head_attention';
import {TokenAndPositionEmbedding} from '../../layers/hub/token_and_position_embedding';
import {randInt, Rng} from '../random';
import {Batch, Task, TF} from './task';

const VOCAB = 12;
const MAX_LEN = 10;
const MIN_LEN = 1;
const PAD = 0;
const WIDTH = 32;
const HEADS = 4;

function block(
  tf: TF,
  x: tfTypes.SymbolicTensor,
  lens: tfTypes.SymbolicTensor,
  name: string,
): tfTypes.SymbolicTensor {
  const att = new MultiHeadAttention({numHeads: HEADS, keyDim: WIDTH / HEADS, name}).apply([
    x,
    lens,
  ]) as tfTypes.SymbolicTensor;
  const h = tf.layers
    .layerNormalization({name: `${name}_norm1`})
    .apply(tf.layers.add().apply([x, att])) as tfTypes.SymbolicTensor;
  const ff = tf.layers
    .dense({units: 2 * WIDTH, activation: 'relu', name: `${name}_ff1`})
    .apply(h) as tfTypes.SymbolicTensor;
  const ff2 = tf.layers
    .dense({units: WIDTH, name: `${name}_ff2`})
    .apply(ff) as tfTypes.SymbolicTensor;
  return tf.layers
    .layerNormalization({name: `${name}_norm2`})
    .apply(tf.layers.add().apply([h, ff2])) as tfTypes.SymbolicTensor;
}

export const reverseTask: Task = {
  name: 'reverse',
  description: 'reverse a padded token sequence (MultiHeadAttention + valid lengths)',
  metadata: {task: 'reverse', vocabSize: VOCAB, maxLen: MAX_LEN, padId: PAD, minLen: MIN_LEN},
  defaultEpochs: 5,
  defaultTrainSize: 4000,
  defaultBatchSize: 64,
  learningRate: 3e-3,
  metricName: 'token accuracy',

  generate(tf: TF, n: number, rng: Rng): Batch {
    const tokens = new Int32Array(n * MAX_LEN).fill(PAD);
    const lengths = new Int32Array(n);
    const targets = new Float32Array(n * MAX_LEN).fill(PAD);
    for (let i = 0; i < n; i++) {
      const len = randInt(rng, MIN_LEN, MAX_LEN);
      lengths[i] = len;
      for (let t = 0; t < len; t++) {
        tokens[i * MAX_LEN + t] = randInt(rng, 1, VOCAB - 1);
      }
      for (let t = 0; t < len; t++) {
        targets[i * MAX_LEN + t] = tokens[i * MAX_LEN + len - 1 - t];
      }
    }
    return {
      inputs: [tf.tensor2d(tokens, [n, MAX_LEN], 'int32'), tf.tensor2d(lengths, [n, 1], 'int32')],
      targets: tf.tensor3d(targets, [n, MAX_LEN, 1]),
    };
  },

  buildModel(tf: TF): tfTypes.LayersModel {
    const tokens = tf.input({shape: [MAX_LEN], dtype: 'int32', name: 'tokens'});
    const lens = tf.input({shape: [1], dtype: 'int32', name: 'lengths'});
    const emb = new TokenAndPositionEmbedding({
      vocabularySize: VOCAB,
      sequenceLength: MAX_LEN,
      embeddingDim: WIDTH,
      name: 'embedding',
    });
    let x = emb.apply(tokens) as tfTypes.SymbolicTensor;
    x = block(tf, x, lens, 'mha1');
    x = block(tf, x, lens, 'mha2');
    const probs = tf.layers
      .dense({units: VOCAB, activation: 'softmax', name: 'logits'})
      .apply(x) as tfTypes.SymbolicTensor;
    return tf.model({inputs: [tokens, lens], outputs: probs, name: 'reverse'});
  },

  accuracy(tf: TF, model: tfTypes.LayersModel, batch: Batch): number {
    return tf.tidy(() => {
      const pred = (model.predict(batch.inputs) as tfTypes.Tensor).argMax(-1).dataSync();
      const target = batch.targets.dataSync();
      const lens = batch.inputs[1].dataSync();
      let ok = 0;
      let n = 0;
      for (let i = 0; i < lens.length; i++) {
        for (let t = 0; t < lens[i]; t++) {
          n++;
          if (pred[i * MAX_LEN + t] === target[i * MAX_LEN + t]) ok++;
        }
      }
      return ok / n;
    });
  },

  attention(tf: TF, model: tfTypes.LayersModel, batch: Batch, index: number) {
    return tf.tidy(() => {
      const layer = model.getLayer('mha2') as MultiHeadAttention;
      const hidden = tf.model({
        inputs: model.inputs,
        outputs: (layer.input as tfTypes.SymbolicTensor[])[0],
      });
      const one = batch.inputs.map((t) => tf.slice(t, [index, 0], [1, t.shape[1] as number]));
      const h = hidden.predict(one) as tfTypes.Tensor;
      const [, scores] = layer.apply([h, one[1]], {
        returnAttentionScores: true,
      }) as tfTypes.Tensor[];
      const len = one[1].dataSync()[0];
      const toks = Array.from(one[0].dataSync()).map((t, i) => (i < len ? String(t) : 'pad'));
      const weights = scores.arraySync() as number[][][][]; // [1, heads, T, S]
      return {
        weights,
        xLabels: toks,
        yLabels: toks.map((_, t) => (t < len ? `out ${t}` : 'pad')),
        title: `reverse: ${toks.slice(0, len).join(' ')} (second attention layer, per head)`,
        titles: weights[0].map((_, h) => `head ${h}`),
      };
    });
  },
};
