/**
 * Task `lookup`: given a padded sequence of distinct tokens and a query token that occurs in it,
 * point at the query's position. The answer is the attention itself: a Bahdanau
 * (AdditiveAttention, d2l form) attention from the query over the valid positions, as in pointer
 * networks.
 *
 * Model contract (userDefinedMetadata):
 * - inputs `[tokens int32 [batch, maxLen], lengths int32 [batch], query int32 [batch]]`; tokens are
 *   distinct, `1..vocabSize-1` at valid positions and `padId` after them; the query is one of them;
 * - output `[batch, maxLen]` probabilities over positions (0 at padded positions); the argmax is
 *   the position of the query token.
 */
import type * as tfTypes from '@tensorflow/tfjs';

import {AdditiveAttention} from '../../layers/attention/additive_attention';
import {TokenAndPositionEmbedding} from '../../layers/hub/token_and_position_embedding';
import {randInt, Rng} from '../random';
import {Batch, Task, TF} from './task';

const VOCAB = 24;
const MAX_LEN = 12;
const MIN_LEN = 2;
const PAD = 0;
const WIDTH = 32;
const HIDDEN = 32;

export const lookupTask: Task = {
  name: 'lookup',
  description: "point at the query token's position (AdditiveAttention + valid lengths)",
  metadata: {task: 'lookup', vocabSize: VOCAB, maxLen: MAX_LEN, padId: PAD, minLen: MIN_LEN},
  defaultEpochs: 6,
  defaultTrainSize: 4000,
  defaultBatchSize: 64,
  learningRate: 1e-2,
  metricName: 'position accuracy',

  generate(tf: TF, n: number, rng: Rng): Batch {
    const tokens = new Int32Array(n * MAX_LEN).fill(PAD);
    const lengths = new Int32Array(n);
    const query = new Int32Array(n);
    const target = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      const len = randInt(rng, MIN_LEN, MAX_LEN);
      lengths[i] = len;
      const pool = Array.from({length: VOCAB - 1}, (_, k) => k + 1);
      for (let t = 0; t < len; t++) {
        const j = randInt(rng, t, pool.length - 1); // partial Fisher-Yates: distinct tokens
        [pool[t], pool[j]] = [pool[j], pool[t]];
        tokens[i * MAX_LEN + t] = pool[t];
      }
      const pos = randInt(rng, 0, len - 1);
      query[i] = tokens[i * MAX_LEN + pos];
      target[i] = pos;
    }
    return {
      inputs: [
        tf.tensor2d(tokens, [n, MAX_LEN], 'int32'),
        tf.tensor2d(lengths, [n, 1], 'int32'),
        tf.tensor2d(query, [n, 1], 'int32'),
      ],
      targets: tf.tensor2d(target, [n, 1]),
    };
  },

  buildModel(tf: TF): tfTypes.LayersModel {
    const tokens = tf.input({shape: [MAX_LEN], dtype: 'int32', name: 'tokens'});
    const lens = tf.input({shape: [1], dtype: 'int32', name: 'lengths'});
    const query = tf.input({shape: [1], dtype: 'int32', name: 'query'});
    const keys = new TokenAndPositionEmbedding({
      vocabularySize: VOCAB,
      sequenceLength: MAX_LEN,
      embeddingDim: WIDTH,
      name: 'key_embedding',
    }).apply(tokens) as tfTypes.SymbolicTensor;
    const q = new TokenAndPositionEmbedding({
      vocabularySize: VOCAB,
      sequenceLength: 1,
      embeddingDim: WIDTH,
      name: 'query_embedding',
    }).apply(query) as tfTypes.SymbolicTensor;
    const [, weights] = new AdditiveAttention({
      numHiddens: HIDDEN,
      returnAttentionScores: true,
      name: 'attention',
    }).apply([q, keys, lens]) as tfTypes.SymbolicTensor[];
    const probs = tf.layers
      .reshape({targetShape: [MAX_LEN], name: 'positions'})
      .apply(weights) as tfTypes.SymbolicTensor;
    return tf.model({inputs: [tokens, lens, query], outputs: probs, name: 'lookup'});
  },

  accuracy(tf: TF, model: tfTypes.LayersModel, batch: Batch): number {
    return tf.tidy(() => {
      const pred = (model.predict(batch.inputs) as tfTypes.Tensor).argMax(-1).dataSync();
      const target = batch.targets.dataSync();
      let ok = 0;
      for (let i = 0; i < pred.length; i++) if (pred[i] === target[i]) ok++;
      return ok / pred.length;
    });
  },

  attention(tf: TF, model: tfTypes.LayersModel, batch: Batch, index: number) {
    return tf.tidy(() => {
      const n = 4;
      const rows = batch.inputs.map((t) => tf.slice(t, [index, 0], [n, t.shape[1] as number]));
      const probs = (model.predict(rows) as tfTypes.Tensor).arraySync() as number[][];
      const toks = rows[0].arraySync() as number[][];
      const q = rows[2].dataSync();
      const lens = rows[1].dataSync();
      return {
        weights: [probs.map((p) => [p])], // [1, n samples, 1 query, maxLen keys]
        xLabels: Array.from({length: MAX_LEN}, (_, t) => String(t)),
        yLabels: ['query'],
        title: 'lookup: attention of the query over the positions',
        titles: toks.map((row, i) => `find ${q[i]} in ${row.slice(0, lens[i]).join(' ')}`),
      };
    });
  },
};
