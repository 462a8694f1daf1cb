/**
 * The training step's memory on a shape where the logits dominate: a causal LM of a 4,096-token
 * vocabulary, 16 wide, 4 x 128 positions (whole logits 8 MiB, every other tensor under 0.3 MiB):
 * a frozen tied ReversibleEmbedding as input and head, one trainable Dense between. With the head
 * frozen the step takes the chunked head loss (16 rows a chunk): its peak tf.memory().numBytes
 * above the weights stays under half the whole logits, where the same step with the head
 * trainable (the whole logits) goes over them; the Dense's gradients agree between the two (1e-5
 * relative). A head with a weight besides its table keeps the whole logits.
 */
import * as tf from '@tensorflow/tfjs';
import * as tfl from '@tensorflow/tfjs-layers';

import {ReversibleEmbedding} from '../../src';
import {lossAndGradients, type CausalLmBatch} from '../../src/finetune/train_step';
import {describeBackends} from '../helpers/backends';
import {lcg} from '../helpers/data';
import {relativeError} from '../helpers/lora_fixture';

const [B, T, V, D] = [4, 128, 4096, 16];

function tinyCausalLm(): {model: tfl.LayersModel; emb: ReversibleEmbedding} {
  const ids = tfl.input({shape: [null], dtype: 'int32', name: 'token_ids'});
  const mask = tfl.input({shape: [null], dtype: 'int32', name: 'padding_mask'});
  const emb = new ReversibleEmbedding({inputDim: V, outputDim: D, name: 'token_embedding'});
  const h = tfl.layers.dense({units: D, name: 'block'}).apply(emb.apply(ids));
  const model = tfl.model({inputs: [ids, mask], outputs: emb.apply(h) as tfl.SymbolicTensor});
  emb.setWeights([tf.tensor2d(lcg(V * D, 31), [V, D])]);
  const dense = model.getLayer('block');
  dense.setWeights([tf.tensor2d(lcg(D * D, 32, 0.3), [D, D]), tf.tensor1d(lcg(D, 33, 0.1))]);
  emb.trainable = false;
  return {model, emb};
}

function batch(): CausalLmBatch {
  const ids = Array.from(lcg(B * (T + 1), 34), (u) => Math.floor(((u + 1) / 2) * V) % V);
  const rows = Array.from({length: B}, (_, b) => ids.slice(b * (T + 1), (b + 1) * (T + 1)));
  const real = [T, T, 100, 50];
  return {
    tokenIds: rows.map((r) => r.slice(0, T)),
    paddingMask: real.map((n) => Array.from({length: T}, (_, i) => (i < n ? 1 : 0))),
    y: rows.map((r) => r.slice(1)),
    sampleWeight: real.map((n) => Array.from({length: T}, (_, i) => (i < n - 1 ? 1 : 0))),
  };
}

describeBackends('the training step with a frozen head', () => {
  it('peaks under half the whole logits; the whole-logits step peaks over them', async () => {
    const {model, emb} = tinyCausalLm();
    const logitBytes = B * T * V * 4;
    const peakAbove = async (run: () => tf.Tensor[]) => {
      const base = tf.memory().numBytes;
      let grads: number[][] = [];
      const p = await tf.profile(() => {
        const gs = run();
        grads = gs.map((g) => Array.from(g.dataSync()));
        tf.dispose(gs);
      });
      return {peak: p.peakBytes - base, grads};
    };
    const before = tf.memory().numTensors;
    const chunked = await peakAbove(() => lossAndGradients(model, batch(), 16).grads);
    expect(chunked.grads.length).toBe(2); // the Dense's kernel and bias
    expect(tf.memory().numTensors).toBe(before);
    emb.trainable = true; // the head's gradient is wanted: the whole logits
    const whole = await peakAbove(() => lossAndGradients(model, batch()).grads.slice(1));
    expect(whole.grads.length).toBe(2);
    expect(chunked.peak).toBeLessThan(logitBytes / 2);
    expect(whole.peak).toBeGreaterThan(logitBytes);
    chunked.grads.forEach((g, i) => expect(relativeError(g, whole.grads[i])).toBeLessThan(1e-5));
    model.dispose();
  });

  it('keeps the whole logits for a head with a weight besides its table', async () => {
    const {model, emb} = tinyCausalLm();
    const wholeLogits = async () => {
      const p = await tf.profile(() => tf.dispose(lossAndGradients(model, batch(), 16).grads));
      return p.kernels.some((k) => k.outputShapes.some((s) => s?.join() === [B * T, V].join()));
    };
    expect(await wholeLogits()).toBe(false);
    // a frozen weight the chunked head would not know of (an adapter its reverse call might add)
    const add = (emb as unknown as {addWeight: (...a: unknown[]) => unknown}).addWeight;
    add.call(emb, 'extra', [1], 'float32', tfl.initializers.zeros(), undefined, false);
    expect(await wholeLogits()).toBe(true);
    model.dispose();
  });
});
