/**
 * The composite-layer base and MultiHeadAttention's sublayer table: explicit weight names (the
 * same under apply and a direct build), sublayers frozen, regularised and fast-initialised with
 * their parent, and the torch loader writing weights by name, all or nothing.
 */
import * as tf from '@tensorflow/tfjs';

import {
  Attention,
  GroupQueryAttention,
  loadTorchMultiheadAttention,
  MultiHeadAttention,
} from '../../../src';
import {GQA_SUBLAYERS} from '../../../src/layers/attention/group_query_attention';
import {MHA_SUBLAYERS} from '../../../src/layers/attention/multi_head_attention_sublayers';
import {randTensor} from '../../helpers/data';
import {saveToMemory} from '../../helpers/save';

const names = (l: tf.layers.Layer) => l.weights.map((w) => w.originalName);
/** A layer built directly (never applied) cannot be disposed by tfjs: free its weights. */
const free = (l: tf.layers.Layer) => l.weights.forEach((w) => w.dispose());

describe('composite layers', () => {
  it('names weights <layer>/<sublayer>/<weight> under apply and under a direct build alike', () => {
    const applied = new MultiHeadAttention({numHeads: 2, keyDim: 3, useGate: true, name: 'mha_a'});
    tf.dispose(applied.apply(tf.ones([1, 4, 5])) as tf.Tensor);
    const built = new MultiHeadAttention({numHeads: 2, keyDim: 3, useGate: true, name: 'mha_b'});
    built.build([1, 4, 5]);
    // Keras' names and build order (written out here, not read from the sublayer table)
    const expected = (n: string) =>
      ['query', 'key', 'gate', 'value', 'attention_output'].flatMap((s) => [
        `${n}/${s}/kernel`,
        `${n}/${s}/bias`,
      ]);
    expect(names(applied)).toEqual(expected('mha_a'));
    expect(names(built)).toEqual(expected('mha_b'));
    expect([...built.weightPaths().keys()]).toEqual(expected('mha_b').map((n) => n.slice(6)));
    // own weights too
    const att = new Attention({useScale: true, name: 'att_b'});
    att.build([
      [1, 2, 3],
      [1, 4, 3],
    ]);
    expect(names(att)).toEqual(['att_b/scale']);
    applied.dispose();
    free(built);
    free(att);
  });

  it("the sublayer tables hold Keras' names, in Keras' build order", () => {
    // Keras 3 MultiHeadAttention: sublayers query, key, value, attention_output (gate, from 3.14,
    // built after key); its saved weights sit under the attributes query_dense, key_dense,
    // _gate_dense, value_dense, output_dense (public properties first, then private attributes)
    expect(MHA_SUBLAYERS.map((s) => [s.name, s.keras3])).toEqual([
      ['query', 'query_dense'],
      ['key', 'key_dense'],
      ['gate', '_gate_dense'],
      ['value', 'value_dense'],
      ['attention_output', 'output_dense'],
    ]);
    // keras-hub GroupQueryAttention: query, key, value, gate, attention_output, saved under the
    // private attributes _query_dense, _key_dense, _value_dense, _gate_dense, _output_dense
    expect(GQA_SUBLAYERS.map((s) => [s.name, s.keras3])).toEqual([
      ['query', '_query_dense'],
      ['key', '_key_dense'],
      ['value', '_value_dense'],
      ['gate', '_gate_dense'],
      ['attention_output', '_output_dense'],
    ]);
  });

  it('names GroupQueryAttention weights <layer>/<sublayer>/<weight> in keras-hub order', () => {
    const gqa = new GroupQueryAttention({
      headDim: 2,
      numQueryHeads: 4,
      numKeyValueHeads: 2,
      useGate: true,
      name: 'gqa_a',
    });
    tf.dispose(gqa.apply(tf.ones([1, 3, 5])) as tf.Tensor);
    expect(names(gqa)).toEqual(
      ['query', 'key', 'value', 'gate', 'attention_output'].flatMap((s) => [
        `gqa_a/${s}/kernel`,
        `gqa_a/${s}/bias`,
      ]),
    );
    gqa.dispose();
  });

  it('freezes, regularises and fast-initialises its sublayers with it', () => {
    const mha = new MultiHeadAttention({
      numHeads: 1,
      keyDim: 2,
      kernelRegularizer: tf.regularizers.l2(),
    });
    mha.setFastWeightInitDuringBuild(true);
    mha.build([1, 3, 4]);
    // fast init: every kernel starts at zeros instead of glorotUniform
    for (const w of mha.weights) expect(tf.max(tf.abs(w.read())).dataSync()[0]).toBe(0);
    expect(mha.losses.length).toBe(4); // one l2 term per kernel
    mha.trainable = false;
    expect(mha.trainableWeights.length).toBe(0);
    expect(mha.nonTrainableWeights.length).toBe(8);
    expect(mha.sublayers.every((s) => !s.trainable)).toBe(true);
    free(mha);
  });

  it('loading a model initialises no sublayer kernel at random (tfjs fast init reaches sublayers)', async () => {
    const x = tf.input({shape: [3, 4]});
    const y = new MultiHeadAttention({numHeads: 2, keyDim: 2}).apply(x) as tf.SymbolicTensor;
    const model = tf.model({inputs: x, outputs: y});
    const artifacts = await saveToMemory(model);
    // tfjs' random initializers draw their seed from Math.random; zeros (fast init) draw nothing
    const random = jest.spyOn(Math, 'random');
    const loaded = await tf.loadLayersModel(tf.io.fromMemory(artifacts));
    expect(random).not.toHaveBeenCalled();
    random.mockRestore();
    tf.tidy(() => {
      const input = tf.ones([1, 3, 4]);
      expect(Array.from((loaded.predict(input) as tf.Tensor).dataSync())).toEqual(
        Array.from((model.predict(input) as tf.Tensor).dataSync()),
      );
    });
    model.dispose();
    loaded.dispose();
  });

  it('loads torch weights by name, all or nothing, and refuses unknown entries', () => {
    const mha = new MultiHeadAttention({numHeads: 2, keyDim: 2});
    mha.build([1, 3, 4]);
    const before = mha.getWeights().map((w) => w.arraySync());
    const E = 4;
    const state = {
      in_proj_weight: randTensor([3 * E, E], 1),
      in_proj_bias: randTensor([3 * E], 2),
      'out_proj.weight': randTensor([E, E], 3),
      'out_proj.bias': tf.tensor1d([1, 2, 3, 4], 'int32'), // wrong dtype: nothing is written
    };
    const count = tf.memory().numTensors;
    expect(() => loadTorchMultiheadAttention(mha, state)).toThrow(
      "expected 'out_proj.bias' to be float32, received int32",
    );
    expect(tf.memory().numTensors).toBe(count);
    expect(mha.getWeights().map((w) => w.arraySync())).toEqual(before);
    expect(() =>
      loadTorchMultiheadAttention(mha, {...state, 'out_proj.bias': randTensor([E], 4), extra: [1]}),
    ).toThrow(/unknown state-dict entries 'extra'/);
    loadTorchMultiheadAttention(mha, {...state, 'out_proj.bias': randTensor([E], 4)});
    // query/kernel [E, H, d] = W_q.T reshaped: element [i, h, j] = in_proj_weight[h * d + j, i]
    const wq = (state.in_proj_weight.arraySync() as number[][]).slice(0, E);
    const kernel = mha.weightPaths().get('query/kernel')?.read().arraySync() as number[][][];
    for (let i = 0; i < E; i++)
      for (let h = 0; h < 2; h++)
        for (let j = 0; j < 2; j++) expect(kernel[i][h][j]).toBeCloseTo(wq[h * 2 + j][i], 6);
    tf.dispose(Object.values(state));
    free(mha);
  });
});
