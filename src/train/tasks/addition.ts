/**
 * Task `addition`: a decoder-only causal language model, trained from scratch, that writes the sum
 * of two 3-digit numbers: `123+045=` -> `0168` then the end token. Operands are written with 3
 * digits and the sum with 4 (leading zeros), one token per character.
 *
 * Model contract (userDefinedMetadata):
 * - vocabulary `vocabulary` (a string: token id i is its i-th character, `_` = padId 0,
 *   `$` = endId 13), `maxLen` 13 = the whole sequence `aaa+bbb=ssss$`, `promptLen` 8;
 * - input int32 ids `[batch, maxLen]` (right-padded with padId), output logits
 *   `[batch, maxLen, vocabSize]`: position t predicts token t + 1 from tokens 0..t (causal).
 * - `generate(model, prompts, {maxLength: 13, endId: 13})` with the 8-token prompt writes the sum.
 *
 * Held out: no problem `a+b` with `heldOut(a, b)` (below, ~10% of them) is ever trained on;
 * evaluation draws from those only, so every answer scored is one the model never saw.
 *
 * Training: teacher forcing over the whole sequence; the loss counts the answer tokens only (the
 * sum's digits and the end token), a cross-entropy over one-hot targets whose rows are zero
 * elsewhere (tfjs' `fit` takes no sample weights).
 */
import type * as tfTypes from '@tensorflow/tfjs';

import {generate} from '../../generate/generate';
import type {StepReport} from '../../generate/step_report';
import {CachedMultiHeadAttention} from '../../layers/hub/cached_multi_head_attention';
import {TransformerDecoder} from '../../layers/hub/transformer_decoder';
import {TokenAndPositionEmbedding} from '../../layers/hub/token_and_position_embedding';
import {randInt, Rng} from '../random';
import {Batch, SamplePurpose, Task, TF} from './task';

export const DIGITS = 3;
export const VOCABULARY = '_0123456789+=$';
const PAD = 0;
const PLUS = VOCABULARY.indexOf('+');
const EQUALS = VOCABULARY.indexOf('=');
const END = VOCABULARY.indexOf('$');
const VOCAB = VOCABULARY.length;
const PROMPT_LEN = 2 * DIGITS + 2; // aaa+bbb=
const ANSWER_LEN = DIGITS + 2; // ssss$
const SEQ_LEN = PROMPT_LEN + ANSWER_LEN;
const LIMIT = 10 ** DIGITS;

const HIDDEN = 64;
const HEADS = 4;
const INTERMEDIATE = 128;
const BLOCKS = 2;

/** About one problem in ten, spread over all of them (a multiplicative hash of `a * 1000 + b`). */
export function heldOut(a: number, b: number): boolean {
  return (Math.imul(a * LIMIT + b, 0x9e3779b1) >>> 0) % 10 === 0;
}

/** Token ids of `a+b=s$`, zero-padded. */
export function encode(a: number, b: number): number[] {
  const digits = (n: number, width: number) =>
    String(n)
      .padStart(width, '0')
      .split('')
      .map((c) => VOCABULARY.indexOf(c));
  return [
    ...digits(a, DIGITS),
    PLUS,
    ...digits(b, DIGITS),
    EQUALS,
    ...digits(a + b, DIGITS + 1),
    END,
  ];
}

export function decode(ids: ArrayLike<number>): string {
  return Array.from(ids, (i) => VOCABULARY[i] ?? '?').join('');
}

/** `count` problems, the held-out ones only (`heldOutOnly`) or never those. */
function problems(rng: Rng, count: number, heldOutOnly: boolean): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  while (out.length < count) {
    const a = randInt(rng, 0, LIMIT - 1);
    const b = randInt(rng, 0, LIMIT - 1);
    if (heldOut(a, b) === heldOutOnly) out.push([a, b]);
  }
  return out;
}

/** One decoder block: keras-hub's `TransformerDecoder`, decoder-only, causal and post-norm. */
function decoderBlock(x: tfTypes.SymbolicTensor, name: string): tfTypes.SymbolicTensor {
  return new TransformerDecoder({
    intermediateDim: INTERMEDIATE,
    numHeads: HEADS,
    activation: 'relu',
    layerNormEpsilon: 1e-5,
    name,
  }).apply(x) as tfTypes.SymbolicTensor;
}

/** Masked cross-entropy: targets are one-hot rows, all-zero rows count for nothing. */
function answerLoss(tf: TF) {
  return (yTrue: tfTypes.Tensor, yPred: tfTypes.Tensor): tfTypes.Tensor =>
    tf.tidy(() =>
      tf.div(tf.neg(tf.sum(tf.mul(yTrue, tf.logSoftmax(yPred)))), tf.maximum(tf.sum(yTrue), 1)),
    );
}

/** Teacher-forced accuracy on the answer tokens (named `acc` for the progress line). */
function answerAccuracy(tf: TF) {
  const acc = (yTrue: tfTypes.Tensor, yPred: tfTypes.Tensor): tfTypes.Tensor =>
    tf.tidy(() => {
      const hit = tf.sum(tf.mul(yTrue, tf.oneHot(tf.argMax(yPred, -1), VOCAB)));
      return tf.div(hit, tf.maximum(tf.sum(yTrue), 1));
    });
  return acc;
}

export const additionTask: Task = {
  name: 'addition',
  description: 'write the sum of two 3-digit numbers (causal decoder, generated greedily)',
  metadata: {
    task: 'addition',
    vocabulary: VOCABULARY,
    vocabSize: VOCAB,
    maxLen: SEQ_LEN,
    promptLen: PROMPT_LEN,
    padId: PAD,
    endId: END,
    digits: DIGITS,
    heldOut: '(Math.imul(a * 1000 + b, 0x9e3779b1) >>> 0) % 10 === 0',
  },
  defaultEpochs: 10,
  defaultTrainSize: 6400,
  defaultBatchSize: 64,
  learningRate: 3e-3,
  // constant while the model finds the digits and carries, then a cosine decay to a tenth over
  // the last 45% of the steps, which settles the rare carries instead of jumping around them
  learningRateSchedule: (progress: number) =>
    progress < 0.55 ? 1 : 0.1 + 0.45 * (1 + Math.cos((Math.PI * (progress - 0.55)) / 0.45)),
  metricName: 'exact match',
  loss: answerLoss,
  metrics: (tf: TF) => [answerAccuracy(tf)],

  generate(tf: TF, n: number, rng: Rng, purpose: SamplePurpose = 'train'): Batch {
    const x = new Int32Array(n * SEQ_LEN).fill(PAD);
    const y = new Float32Array(n * SEQ_LEN * VOCAB);
    problems(rng, n, purpose !== 'train').forEach(([a, b], i) => {
      const ids = encode(a, b);
      for (let t = 0; t < SEQ_LEN - 1; t++) {
        x[i * SEQ_LEN + t] = ids[t];
        if (t >= PROMPT_LEN - 1) y[(i * SEQ_LEN + t) * VOCAB + ids[t + 1]] = 1;
      }
    });
    return {
      inputs: [tf.tensor2d(x, [n, SEQ_LEN], 'int32')],
      targets: tf.tensor3d(y, [n, SEQ_LEN, VOCAB]),
    };
  },

  buildModel(tf: TF): tfTypes.LayersModel {
    const ids = tf.input({shape: [SEQ_LEN], dtype: 'int32', name: 'token_ids'});
    let x = new TokenAndPositionEmbedding({
      vocabularySize: VOCAB,
      sequenceLength: SEQ_LEN,
      embeddingDim: HIDDEN,
      name: 'embedding',
    }).apply(ids) as tfTypes.SymbolicTensor;
    for (let i = 0; i < BLOCKS; i++) x = decoderBlock(x, `decoder_${i}`);
    const logits = tf.layers
      .dense({units: VOCAB, name: 'logits'})
      .apply(x) as tfTypes.SymbolicTensor;
    return tf.model({inputs: ids, outputs: logits, name: 'addition'});
  },

  /** Greedy generation from the prompts: the share of exactly right answers (end token included). */
  async accuracy(
    _tf: TF,
    model: tfTypes.LayersModel,
    batch: Batch,
    onCompile?: (report: StepReport) => void,
  ): Promise<number> {
    const rows = batch.inputs[0].arraySync() as number[][];
    const prompts = rows.map((r) => [
      ...r.slice(0, PROMPT_LEN),
      ...new Array(ANSWER_LEN).fill(PAD),
    ]);
    const out = await generate(model, prompts, {
      maxLength: SEQ_LEN,
      endId: END,
      padId: PAD,
      onCompile,
    });
    const got = out.arraySync();
    out.dispose();
    const ok = got.filter((r, i) => {
      const [a, b] = decode(rows[i].slice(0, PROMPT_LEN - 1))
        .split('+')
        .map(Number);
      return decode(r) === decode(encode(a, b));
    }).length;
    return ok / rows.length;
  },

  async attention(tf: TF, model: tfTypes.LayersModel, batch: Batch, index: number) {
    const row = (batch.inputs[0].arraySync() as number[][])[index];
    const prompt = [...row.slice(0, PROMPT_LEN), ...new Array(ANSWER_LEN).fill(PAD)];
    const out = await generate(model, [prompt], {maxLength: SEQ_LEN, endId: END, padId: PAD});
    const ids = out.arraySync()[0];
    out.dispose();
    return tf.tidy(() => {
      // post-norm: the self-attention of the last block attends over that block's input
      const decoder = model.getLayer(`decoder_${BLOCKS - 1}`) as TransformerDecoder;
      const hidden = tf.model({
        inputs: model.inputs,
        outputs: decoder.input as tfTypes.SymbolicTensor,
      });
      const h = hidden.predict(tf.tensor2d([ids], [1, SEQ_LEN], 'int32')) as tfTypes.Tensor;
      const causal = tf.tensor3d(
        [
          Array.from({length: SEQ_LEN}, (_, q) =>
            Array.from({length: SEQ_LEN}, (_, k) => (k <= q ? 1 : 0)),
          ),
        ],
        [1, SEQ_LEN, SEQ_LEN],
        'bool',
      );
      const [, scores] = (decoder.selfAttention as CachedMultiHeadAttention).apply(h, {
        attentionMask: causal,
        returnAttentionScores: true,
      }) as tfTypes.Tensor[];
      // rows: the positions whose outputs are the answer tokens (the `=` and the sum's digits)
      const all = scores.arraySync() as number[][][][]; // [1, heads, T, T]
      const rowsFrom = PROMPT_LEN - 1;
      const weights = [all[0].map((head) => head.slice(rowsFrom, SEQ_LEN - 1))];
      const text = decode(ids);
      const labels = text.split('');
      return {
        weights,
        xLabels: labels,
        yLabels: labels.slice(rowsFrom + 1, SEQ_LEN).map((c) => `-> ${c}`),
        title: `addition: ${text.replace('$', '')} (last decoder block, per head; row t writes token t + 1)`,
        titles: weights[0].map((_, hd) => `head ${hd}`),
      };
    });
  },
};
