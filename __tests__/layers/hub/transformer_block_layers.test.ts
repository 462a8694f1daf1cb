/**
 * keras-hub's TransformerEncoder and TransformerDecoder (harness cases: helpers/layer_harness.ts):
 * plain-loop numerics (helpers/transformer_reference.ts, written from keras-hub 0.32's source)
 * for masks, pre- and post-norm and the activations, cached decoding against the whole sequence,
 * and errors.
 * Keras' own outputs are checked by the converted fixtures (keras_fixtures.test.ts).
 *
 * Tolerance: 1e-5 absolute and relative (float32 against float64 loops).
 */
import * as tf from '@tensorflow/tfjs';

import {TransformerDecoder, TransformerEncoder} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {randTensor} from '../../helpers/data';
import {
  BlockOptions,
  BlockWeights,
  decoderRow,
  encoderRow,
  gelu,
  geluTanh,
  MhaWeights,
  relu,
} from '../../helpers/transformer_reference';

const B = 2;
const T = 5;
const D = 8;
const S = 4;

type Block = TransformerEncoder | TransformerDecoder;

/** Gives every weight random values (layer norms and biases too, so each one matters). */
function randomize(layer: Block, seed: number): void {
  layer.setWeights(layer.getWeights().map((w, i) => randTensor(w.shape, seed + i, 0.6)));
}

function weightsOf(layer: Block, self: string, cross?: string): BlockWeights {
  const p = layer.weightPaths();
  const get = (name: string) => {
    const v = p.get(name);
    if (v == null) throw new Error(`no weight ${name}; have ${[...p.keys()].join(', ')}`);
    return v.read().arraySync() as never;
  };
  const att = (n: string): MhaWeights => ({
    qk: get(`${n}/query/kernel`),
    qb: get(`${n}/query/bias`),
    kk: get(`${n}/key/kernel`),
    kb: get(`${n}/key/bias`),
    vk: get(`${n}/value/kernel`),
    vb: get(`${n}/value/bias`),
    ok: get(`${n}/attention_output/kernel`),
    ob: get(`${n}/attention_output/bias`),
  });
  const norm = (n: string): [number[], number[]] => [get(`${n}/gamma`), get(`${n}/beta`)];
  return {
    self: att(self),
    selfNorm: norm('self_attention_layer_norm'),
    cross: cross ? att(cross) : undefined,
    crossNorm: cross ? norm(`${cross}_layer_norm`) : undefined,
    ffNorm: norm('feedforward_layer_norm'),
    ff1: [get('feedforward_intermediate_dense/kernel'), get('feedforward_intermediate_dense/bias')],
    ff2: [get('feedforward_output_dense/kernel'), get('feedforward_output_dense/bias')],
  };
}

const PAD = [
  [1, 1, 1, 0, 0],
  [1, 1, 1, 1, 1],
];
const ENC_PAD = [
  [1, 1, 0, 0],
  [1, 1, 1, 0],
];

describeBackends('TransformerEncoder', () => {
  const cases: Array<[string, BlockOptions, string]> = [
    ['post-norm, relu', {normalizeFirst: false, epsilon: 1e-5, activation: relu}, 'relu'],
    ['pre-norm, exact gelu', {normalizeFirst: true, epsilon: 1e-3, activation: gelu}, 'gelu'],
  ];
  for (const [what, o, activation] of cases) {
    it(`= plain loops (${what}) with a padding mask and an attention mask`, () => {
      tf.tidy(() => {
        const enc = new TransformerEncoder({
          intermediateDim: 12,
          numHeads: 2,
          activation,
          normalizeFirst: o.normalizeFirst,
          layerNormEpsilon: o.epsilon,
        });
        const x = randTensor([B, T, D], 3);
        enc.apply(x);
        randomize(enc, 40);
        const band = (i: number, j: number) => Math.abs(i - j) <= 2;
        const attention = tf.tensor3d(
          [0, 1].map(() =>
            Array.from({length: T}, (_, i) =>
              Array.from({length: T}, (_, j) => (band(i, j) ? 1 : 0)),
            ),
          ),
          [B, T, T],
          'int32',
        );
        const y = enc.apply(x, {
          paddingMask: tf.tensor2d(PAD, [B, T], 'bool'),
          attentionMask: attention,
        }) as tf.Tensor;
        const w = weightsOf(enc, 'self_attention_layer');
        const xs = x.arraySync() as number[][][];
        const expected = xs.map((row, b) =>
          encoderRow(row, w, o, (i, j) => PAD[b][j] === 1 && band(i, j)),
        );
        expectClose(y, expected, 1e-5, 1e-5);
      });
    });
  }

  for (const normalizeFirst of [false, true]) {
    it(`= plain loops with the input's Keras mask (normalizeFirst ${normalizeFirst}): it masks keys and queries`, () => {
      tf.tidy(() => {
        // padded query rows are fully masked: uniform over all keys, as in Keras
        const o: BlockOptions = {normalizeFirst, epsilon: 1e-5, activation: relu};
        const enc = new TransformerEncoder({intermediateDim: 12, numHeads: 2, normalizeFirst});
        const x = randTensor([B, T, D], 5);
        enc.apply(x);
        randomize(enc, 70);
        x.kerasMask = tf.tensor2d(PAD, [B, T], 'bool');
        const y = enc.apply(x) as tf.Tensor;
        const w = weightsOf(enc, 'self_attention_layer');
        const expected = (x.arraySync() as number[][][]).map((row, b) =>
          encoderRow(row, w, o, (i, j) => PAD[b][i] === 1 && PAD[b][j] === 1),
        );
        expectClose(y, expected, 1e-5, 1e-5);
        // the output carries the mask on
        expect((y.kerasMask as tf.Tensor).arraySync()).toEqual(PAD);
      });
    });
  }

  it('returns the attention scores [batch, heads, T, T] in eager calls', () => {
    tf.tidy(() => {
      const enc = new TransformerEncoder({intermediateDim: 12, numHeads: 2});
      const [y, scores] = enc.apply(randTensor([B, T, D], 1), {
        paddingMask: tf.tensor2d(PAD, [B, T], 'int32'),
        returnAttentionScores: true,
      }) as tf.Tensor[];
      expect(y.shape).toEqual([B, T, D]);
      expect(scores.shape).toEqual([B, 2, T, T]);
      // padded keys get no weight
      const s = scores.arraySync() as number[][][][];
      expect(s[0][1][0][3]).toBe(0);
      expectClose(tf.sum(scores, -1), tf.ones([B, 2, T]), 1e-6, 1e-6);
    });
  });

  it('refuses bad options and inputs with errors that say what was expected', () => {
    expect(() => new TransformerEncoder({intermediateDim: 12, numHeads: 0})).toThrow(
      /expected numHeads to be a positive integer, received 0/,
    );
    expect(
      () => new TransformerEncoder({intermediateDim: 4, numHeads: 1, activation: 'nope'}),
    ).toThrow(/nope/);
    expect(
      () => new TransformerEncoder({intermediateDim: 4, numHeads: 1, ropeType: 'yarn'} as never),
    ).toThrow(/the option 'ropeType' = "yarn" is not implemented/);
    const enc = new TransformerEncoder({intermediateDim: 12, numHeads: 2});
    const x = tf.zeros([B, T, D]);
    expect(() => enc.apply(x, {padding_mask: tf.ones([B, T])})).toThrow(
      /unknown call option 'padding_mask'; did you mean 'paddingMask'\?/,
    );
    expect(() => enc.apply(x, {paddingMask: tf.ones([B, T + 1], 'bool')})).toThrow(
      /expected paddingMask of shape \[2, 5\], received \[2, 6\]/,
    );
    expect(() => new TransformerEncoder({intermediateDim: 4, numHeads: 16}).apply(x)).toThrow(
      /input width 8 must be >= numHeads \(16\)/,
    );
    tf.dispose(x);
  });
});

describeBackends('TransformerDecoder', () => {
  it('= plain loops, decoder-only: causal AND the key padding mask (queries not masked)', () => {
    tf.tidy(() => {
      const o: BlockOptions = {normalizeFirst: false, epsilon: 1e-5, activation: relu};
      const dec = new TransformerDecoder({intermediateDim: 12, numHeads: 2});
      const x = randTensor([B, T, D], 9);
      dec.apply(x);
      randomize(dec, 90);
      x.kerasMask = tf.tensor2d(PAD, [B, T], 'bool');
      const y = dec.apply(x) as tf.Tensor;
      const w = weightsOf(dec, 'self_attention');
      const expected = (x.arraySync() as number[][][]).map((row, b) =>
        decoderRow(row, w, o, (i, j) => j <= i && PAD[b][j] === 1),
      );
      expectClose(y, expected, 1e-5, 1e-5);
    });
  });

  it('= plain loops with cross-attention, pre-norm, tanh gelu, useCausalMask false', () => {
    tf.tidy(() => {
      const o: BlockOptions = {normalizeFirst: true, epsilon: 1e-5, activation: geluTanh};
      const dec = new TransformerDecoder({
        intermediateDim: 12,
        numHeads: 2,
        normalizeFirst: true,
        activation: 'gelu_approximate',
        useCausalMask: false,
      });
      const x = randTensor([B, T, D], 11);
      const e = randTensor([B, S, D], 12);
      dec.apply([x, e]);
      randomize(dec, 120);
      const y = dec.apply([x, e], {
        decoderPaddingMask: tf.tensor2d(PAD, [B, T], 'bool'),
        encoderPaddingMask: tf.tensor2d(ENC_PAD, [B, S], 'bool'),
      }) as tf.Tensor;
      const w = weightsOf(dec, 'self_attention', 'cross_attention');
      const es = e.arraySync() as number[][][];
      const expected = (x.arraySync() as number[][][]).map((row, b) =>
        decoderRow(
          row,
          w,
          o,
          (_, j) => PAD[b][j] === 1,
          es[b],
          (_, j) => ENC_PAD[b][j] === 1,
        ),
      );
      expectClose(y, expected, 1e-5, 1e-5);
    });
  });

  it('cached decoding (a prefill, then one token at a time) equals the whole causal sequence', () => {
    tf.tidy(() => {
      for (const cross of [false, true]) {
        const dec = new TransformerDecoder({
          intermediateDim: 12,
          numHeads: 2,
          normalizeFirst: cross,
        });
        const x = randTensor([B, T, D], 13);
        const e = randTensor([B, S, D], 14);
        const full = dec.apply(cross ? [x, e] : x) as tf.Tensor;
        randomize(dec, 130);
        const whole = dec.apply(cross ? [x, e] : x) as tf.Tensor;
        expect(tf.max(tf.abs(tf.sub(whole, full))).dataSync()[0]).toBeGreaterThan(1e-3);
        let selfCache: tf.Tensor = tf.zeros([B, 2, T, 2, 4]);
        let crossCache: tf.Tensor | undefined;
        if (cross) {
          // keras-hub fills the cross-attention cache once (update index 0), then reads it
          crossCache = tf.zeros([B, 2, S, 2, 4]);
        }
        const pieces: tf.Tensor[] = [];
        let t = 0;
        for (const n of [3, 1, 1]) {
          const step = tf.slice(x, [0, t, 0], [B, n, D]);
          const out = dec.apply(cross ? [step, e] : step, {
            selfAttentionCache: selfCache,
            selfAttentionCacheUpdateIndex: t,
            crossAttentionCache: crossCache,
            crossAttentionCacheUpdateIndex: cross && t === 0 ? 0 : undefined,
          }) as tf.Tensor[];
          expect(out.length).toBe(cross ? 3 : 2);
          pieces.push(out[0]);
          selfCache = out[1];
          if (cross) crossCache = out[2];
          t += n;
        }
        expectClose(tf.concat(pieces, 1), whole, 1e-5, 1e-5);
      }
    });
  });

  it('refuses calls that change the inputs or misuse the cache', () => {
    const dec = new TransformerDecoder({intermediateDim: 12, numHeads: 2});
    const x = tf.zeros([B, T, D]);
    const e = tf.zeros([B, S, D]);
    dec.apply(x);
    expect(() => dec.apply([x, e])).toThrow(/built without cross-attention but is called with/);
    expect(() => dec.apply(x, {selfAttentionCacheUpdateIndex: 0})).toThrow(
      /selfAttentionCacheUpdateIndex was given without a selfAttentionCache/,
    );
    expect(() => dec.apply(x, {decoder_padding_mask: x})).toThrow(
      /did you mean 'decoderPaddingMask'/,
    );
    const symbolic = tf.input({shape: [T, D]});
    expect(() => dec.apply(symbolic, {selfAttentionCache: x})).toThrow(/works in eager calls only/);
    tf.dispose([x, e]);
  });
});
