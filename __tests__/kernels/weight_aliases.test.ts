/**
 * Weights held once on tfjs' cpu and tensorflow backends (src/generate/weight_aliases.ts): a step
 * memory kept with its model (`stepMemory(true)`) makes each weight it copies in the tensor's own
 * values (a view of the copy), follows its memory when it grows, gives a former tensor its values
 * back before the copy's place takes new data, and gives every tensor its values back when freed
 * (or leaves the views when the model goes too). Checked on the backends' records of the tensors'
 * data and against the values each tensor was made from.
 */
import * as tf from '@tensorflow/tfjs';

import {generate, releaseGenerateMemory} from '../../src';
import {stepMemory, type StepMemory} from '../../src/generate/step_memory';
import {int8Tensor, int8ValuesOf} from '../../src/ops/int8';
import {heldValues} from '../helpers/backend_values';
import {describeBackends, expectNoLeak} from '../helpers/backends';
import {lcg} from '../helpers/data';

const onMemory = (t: tf.Tensor, m: StepMemory) => heldValues(t)?.buffer === m.memory.buffer;

function ownMemory(alias: boolean): StepMemory {
  const m = stepMemory(alias);
  if (m.memory == null) throw new Error(m.reason);
  return m.memory;
}

const ints = (size: number, seed: number) =>
  Int8Array.from({length: size}, (_, i) => ((i * 7919 + seed * 104729) % 255) - 127);

describeBackends('weights held once with the step memory', (backend) => {
  if (backend === 'wasm') {
    it('wasm: weights are read in place on its heap; nothing is aliased', () => {
      const t = tf.tensor1d(lcg(64, 1));
      const m = ownMemory(true);
      expect(m.kind).toBe('heap');
      m.weight(t);
      expect(m.counts.uploads).toBe(0);
      m.dispose();
      t.dispose();
    });
    return;
  }

  it('a float32 and an int8 weight copied in become their tensors values: one memory', async () => {
    const floats = lcg(5000, 3);
    const bytes = ints(7000, 4);
    const f = tf.tensor2d(floats, [50, 100]);
    const q = int8Tensor(bytes, [70, 100]);
    const m = ownMemory(true);
    const atF = m.weight(f);
    const atQ = m.int8Weight(q, {kind: 'simd'} as never);
    expect(onMemory(f, m)).toBe(true);
    expect(onMemory(q, m)).toBe(true);
    // the views are the copies themselves: a byte written there is the tensor's
    expect(Array.from(f.dataSync())).toEqual(Array.from(floats));
    expect(Array.from(int8ValuesOf(q))).toEqual(Array.from(bytes));
    new Float32Array(m.memory.buffer, atF, 1)[0] = 42;
    expect(f.dataSync()[0]).toBe(42);
    expect(new Int8Array(m.memory.buffer, atQ, 2)).toEqual(bytes.subarray(0, 2));
    // ops read them (tfjs-node then takes the values into a TensorFlow tensor of its own)
    expect(await tf.sum(f).data()).toBeDefined();
    m.dispose();
    tf.dispose([f, q]);
  });

  it('without aliasWeights (a memory for one run), the tensors keep their own values', () => {
    const f = tf.tensor1d(lcg(300, 5));
    const m = ownMemory(false);
    m.weight(f);
    expect(m.counts.uploads).toBe(1);
    expect(onMemory(f, m)).toBe(false);
    m.dispose();
    f.dispose();
  });

  it('the views follow the memory when it grows (its former buffer detached)', () => {
    const floats = lcg(4000, 6);
    const f = tf.tensor1d(floats);
    const m = ownMemory(true);
    m.weight(f);
    const grows = m.counts.grows;
    const before = m.memory.buffer;
    m.beginRun();
    m.alloc(8 << 20); // past the memory's size: it grows
    expect(m.counts.grows).toBeGreaterThan(grows);
    expect(before.byteLength).toBe(0); // detached
    expect(onMemory(f, m)).toBe(true);
    expect(Array.from(f.dataSync())).toEqual(Array.from(floats));
    m.dispose();
    f.dispose();
  });

  it('a weight assigned new data: copied into its place, the former data keeps its own values', () => {
    const first = lcg(1000, 7);
    const second = lcg(1000, 8);
    const t0 = tf.tensor1d(first);
    const v = tf.variable(t0, false); // shares t0's data
    const m = ownMemory(true);
    const at = m.weight(v);
    expect(onMemory(t0, m)).toBe(true);
    const t1 = tf.tensor1d(second);
    v.assign(t1);
    expect(m.weight(v)).toBe(at); // the same place, new values
    expect(onMemory(v, m)).toBe(true);
    expect(Array.from(v.dataSync())).toEqual(Array.from(second));
    // t0 still reads what it was made of, from an array of its own
    expect(onMemory(t0, m)).toBe(false);
    expect(Array.from(t0.dataSync())).toEqual(Array.from(first));
    m.dispose();
    tf.dispose([t0, v, t1]);
  });

  it('freed: every tensor gets its values back; freed with the model: the views stay', () => {
    const floats = lcg(2000, 9);
    const a = tf.tensor1d(floats);
    const m = ownMemory(true);
    m.weight(a);
    m.dispose();
    expect(onMemory(a, m)).toBe(false);
    expect(Array.from(a.dataSync())).toEqual(Array.from(floats));
    const b = tf.tensor1d(floats);
    const n = ownMemory(true);
    n.weight(b);
    n.dispose(true);
    expect(onMemory(b, n)).toBe(true); // its values keep the buffer alive
    expect(Array.from(b.dataSync())).toEqual(Array.from(floats));
    tf.dispose([a, b]);
  });

  it('generate: the model weights read from the kept memory; releaseGenerateMemory gives them back', async () => {
    const ids = tf.input({shape: [null], dtype: 'int32'});
    const emb = tf.layers.embedding({inputDim: 11, outputDim: 8}).apply(ids) as tf.SymbolicTensor;
    const out = tf.layers.dense({units: 11}).apply(emb) as tf.SymbolicTensor;
    const model = tf.model({inputs: ids, outputs: out});
    const weights = model.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 1, 'float32', i));
    model.setWeights(weights);
    tf.dispose(weights);
    const prompts = [[1, 2, 3]];
    const held = model.weights.map((w) => w.read());
    const before = held.map((t) => Array.from(t.dataSync()));
    let got: number[][] = [];
    await expectNoLeak(async () => {
      const out = await generate(model, prompts, {maxLength: 8});
      got = (await out.array()) as number[][];
      out.dispose();
    });
    // every weight of the compiled step reads from one memory, the tensors' own values
    const buffers = new Set(held.map((t) => heldValues(t)?.buffer));
    expect(buffers.size).toBe(1);
    const kept = [...buffers][0];
    expect(kept).toBeDefined();
    expect(held.map((t) => Array.from(t.dataSync()))).toEqual(before);
    releaseGenerateMemory(model);
    expect(held.some((t) => heldValues(t)?.buffer === kept)).toBe(false);
    expect(held.map((t) => Array.from(t.dataSync()))).toEqual(before);
    // the same tokens as the model's own predictions, step by step (no step memory)
    const eager = await generate(model, prompts, {maxLength: 8, useCache: false});
    expect(await eager.array()).toEqual(got);
    eager.dispose();
    model.dispose();
  });
});
