/**
 * The int8 layers and `quantize(model, 'int8')` against plain loops: each quantized weight is
 * the abs-max quantization of its float weight (per output channel; Embedding per row) computed
 * with Math.fround loops, and a QuantizedDense call on 3-D input equals a loop that quantizes each
 * token, multiplies in BigInt and divides in float32 (exactly, tolerance 0). A model with
 * GroupQueryAttention, a TransformerEncoder, Embedding, EinsumDense and Dense: every such weight
 * quantized, saved and loaded back predicting the same (exactly), no tensor leaked.
 */
import * as tf from '@tensorflow/tfjs';

import {
  convertKerasArtifacts,
  EinsumDense,
  GroupQueryAttention,
  QuantizedDense,
  quantize,
  int8Tensor,
  int8ValuesOf,
  ReversibleEmbedding,
  toKeras3Artifacts,
  TransformerEncoder,
} from '../../../src/index';
import {describeBackends} from '../../helpers/backends';
import {lcg} from '../../helpers/data';
import {saveToMemory} from '../../helpers/save';

const f = Math.fround;

function roundHalfEven(v: number): number {
  const b = Math.floor(v);
  const d = v - b;
  if (d < 0.5) return b;
  if (d > 0.5) return b + 1;
  return b % 2 === 0 ? b : b + 1;
}

/** Keras' abs-max quantization of `n` groups of `k` values picked by `at(group, i)`. */
function absMax(n: number, k: number, at: (g: number, i: number) => number) {
  const scale: number[] = [];
  const q: number[][] = [];
  for (let g = 0; g < n; g++) {
    let amax = 0;
    for (let i = 0; i < k; i++) amax = Math.max(amax, Math.abs(at(g, i)));
    const s = f(127 / f(amax + f(1e-7)));
    scale.push(s);
    q.push(
      Array.from({length: k}, (_, i) =>
        Math.min(127, Math.max(-127, roundHalfEven(f(at(g, i) * s)))),
      ),
    );
  }
  return {scale, q};
}

function buildModel(): tf.LayersModel {
  const ids = tf.input({shape: [5], dtype: 'int32'});
  let x = tf.layers
    .embedding({inputDim: 30, outputDim: 8, name: 'emb'})
    .apply(ids) as tf.SymbolicTensor;
  x = new GroupQueryAttention({
    headDim: 4,
    numQueryHeads: 4,
    numKeyValueHeads: 2,
    name: 'gqa',
  }).apply(x) as tf.SymbolicTensor;
  x = new TransformerEncoder({intermediateDim: 16, numHeads: 2, name: 'enc'}).apply(
    x,
  ) as tf.SymbolicTensor;
  x = new EinsumDense({
    equation: 'abc,cde->abde',
    outputShape: [null, 2, 3],
    biasAxes: 'de',
    name: 'ed',
  }).apply(x) as tf.SymbolicTensor;
  x = tf.layers.reshape({targetShape: [5, 6]}).apply(x) as tf.SymbolicTensor;
  const y = tf.layers.dense({units: 7, activation: 'relu', name: 'head'}).apply(x);
  const model = tf.model({inputs: ids, outputs: y as tf.SymbolicTensor});
  model.weights.forEach((w, i) =>
    w.write(
      tf.tensor(
        lcg(
          (w.shape as number[]).reduce((p, d) => p * d, 1),
          10 + i,
          0.7,
        ),
        w.shape as number[],
      ),
    ),
  );
  return model;
}

describeBackends('int8 layers', () => {
  it('QuantizedDense on [2, 3, 40]: per-token quantization, BigInt product, float32 division', () => {
    const [B, T, K, N] = [2, 3, 40, 5];
    const layer = new QuantizedDense({units: N, activation: 'relu'});
    layer.build([null, T, K]);
    const kernel = lcg(K * N, 1, 127).map(Math.round);
    const kScale = lcg(N, 2, 20).map((v) => 30 + v);
    const bias = lcg(N, 3, 0.5);
    // int8 values go in as bytes (one per value); a float32 kernel is refused by tfjs' dtype check
    expect(() =>
      layer.setWeights([tf.tensor2d(kernel, [K, N]), tf.tensor1d(bias), tf.tensor1d(kScale)]),
    ).toThrow(/dtype/);
    layer.setWeights([
      int8Tensor(Int8Array.from(kernel), [K, N]),
      tf.tensor1d(bias),
      tf.tensor1d(kScale),
    ]);
    expect(layer.kernel?.read().dtype).toBe('bool');
    const x = lcg(B * T * K, 4, 2);
    const {scale, q} = absMax(B * T, K, (g, i) => x[g * K + i]);
    const want: number[] = [];
    for (let r = 0; r < B * T; r++) {
      for (let j = 0; j < N; j++) {
        let s = BigInt(0);
        for (let k = 0; k < K; k++) s += BigInt(q[r][k]) * BigInt(kernel[k * N + j]);
        want.push(Math.max(0, f(f(f(Number(s)) / f(kScale[j] * scale[r])) + bias[j])));
      }
    }
    const xt = tf.tensor3d(x, [B, T, K]);
    const before = tf.memory().numTensors;
    const y = layer.apply(xt) as tf.Tensor;
    expect(tf.memory().numTensors).toBe(before + 1);
    expect(y.shape).toEqual([B, T, N]);
    expect(Array.from(y.dataSync())).toEqual(want);
    tf.dispose([xt, y]);
    layer.weights.forEach((w) => w.dispose());
  });

  it('quantize: each kernel abs-max quantized per output channel, each table per row', () => {
    const model = buildModel();
    const before = tf.memory().numTensors;
    const q = quantize(model, 'int8');
    const floats = new Map(model.weights.map((w) => [w.originalName, w.read()]));
    const ints = new Map(q.weights.map((w) => [w.originalName, w.read()]));
    // every projection and feed-forward layer of the composite layers, the embedding, the dense
    const scaled = [...ints.keys()].filter((n) => /_scale$/.test(n)).sort();
    expect(scaled).toEqual(
      [
        'ed/kernel_scale',
        'emb/embeddings_scale',
        'enc/feedforward_intermediate_dense/kernel_scale',
        'enc/feedforward_output_dense/kernel_scale',
        'enc/self_attention_layer/attention_output/kernel_scale',
        'enc/self_attention_layer/key/kernel_scale',
        'enc/self_attention_layer/query/kernel_scale',
        'enc/self_attention_layer/value/kernel_scale',
        'gqa/key/kernel_scale',
        'gqa/attention_output/kernel_scale',
        'gqa/query/kernel_scale',
        'gqa/value/kernel_scale',
        'head/kernel_scale',
      ].sort(),
    );
    for (const name of scaled) {
      const base = name.replace(/_scale$/, '');
      const float = floats.get(base) as tf.Tensor;
      const values = Array.from(int8ValuesOf(ints.get(base) as tf.Tensor));
      const scale = Array.from((ints.get(name) as tf.Tensor).dataSync());
      const data = float.dataSync();
      const perRow = base.endsWith('embeddings');
      // kernels: [in..., out...] with the leading axes contracted (MHA's output projection
      // [heads, headDim, out]: two of them); tables [rows, dim]
      const contracted =
        name.includes('attention_output') || name === 'gqa/attention_output/kernel_scale' ? 2 : 1;
      const dims = float.shape as number[];
      const inner = perRow ? dims[1] : dims.slice(0, contracted).reduce((p, d) => p * d, 1);
      const outer = float.size / inner;
      const ref = perRow
        ? absMax(outer, inner, (g, i) => data[g * inner + i])
        : absMax(outer, inner, (g, i) => data[i * outer + g]);
      expect(scale).toEqual(ref.scale);
      const z = (v: number) => v + 0;
      const want = perRow
        ? ref.q.flat()
        : Array.from({length: float.size}, (_, e) => ref.q[e % outer][Math.floor(e / outer)]);
      expect(values.map(z)).toEqual(want.map(z));
    }
    // every other weight copied
    for (const [n, w] of ints) {
      if (!scaled.some((s) => s.replace(/_scale$/, '') === n) && !n.endsWith('_scale')) {
        expect(Array.from(w.dataSync())).toEqual(
          Array.from((floats.get(n) as tf.Tensor).dataSync()),
        );
      }
    }
    q.dispose();
    expect(tf.memory().numTensors).toBe(before);
    model.dispose();
  });

  it('a quantized model saves and loads back, predicting the same exactly; no tensor leaks', async () => {
    const model = buildModel();
    const q = quantize(model, 'int8');
    const ids = tf.tensor2d(
      [
        [1, 5, 9, 0, 29],
        [3, 3, 3, 12, 7],
      ],
      [2, 5],
      'int32',
    );
    const y = q.predict(ids) as tf.Tensor;
    const yFloat = model.predict(ids) as tf.Tensor;
    // int8, not the float model: close, not equal
    expect(tf.max(tf.abs(tf.sub(y, yFloat))).dataSync()[0]).toBeGreaterThan(0);
    const artifacts = await saveToMemory(q);
    const text = JSON.stringify(artifacts.modelTopology);
    expect(text).toContain('"class_name":"QuantizedDense"');
    expect(text).toContain('"quantization_mode":"int8"');
    const loaded = await tf.loadLayersModel(tf.io.fromMemory(artifacts));
    const before = tf.memory().numTensors;
    const y2 = loaded.predict(ids) as tf.Tensor;
    expect(tf.memory().numTensors).toBe(before + 1);
    expect(Array.from(y2.dataSync())).toEqual(Array.from(y.dataSync()));
    tf.dispose([ids, y, y2, yFloat]);
    loaded.dispose();
    q.dispose();
    model.dispose();
  });

  it('Keras 3 export: kernel int8 (bytes, bool in the manifest), kernel_scale, QuantizedDTypePolicy; read back exactly', async () => {
    const model = buildModel();
    const q = quantize(model, 'int8');
    const artifacts = await toKeras3Artifacts(await saveToMemory(q));
    const specs = new Map((artifacts.weightSpecs ?? []).map((w) => [w.name, w]));
    const spec = (n: string) => {
      const w = specs.get(n);
      return w == null ? undefined : [w.dtype, w.shape];
    };
    // Dense: kernel, bias, kernel_scale as Keras 3 numbers them
    expect(spec('layers/dense/vars/0')).toEqual(['bool', [6, 7]]);
    expect(spec('layers/dense/vars/1')).toEqual(['float32', [7]]);
    expect(spec('layers/dense/vars/2')).toEqual(['float32', [7]]);
    expect(spec('layers/embedding/vars/0')).toEqual(['bool', [30, 8]]);
    expect(spec('layers/embedding/vars/1')).toEqual(['float32', [30]]);
    expect(spec('layers/einsum_dense/vars/2')).toEqual(['float32', [1, 1, 2, 3]]);
    expect(spec('layers/grouped_query_attention/_query_dense/vars/0')).toEqual(['bool', [8, 4, 4]]);
    expect(spec('layers/grouped_query_attention/_query_dense/vars/2')).toEqual([
      'float32',
      [1, 1, 4, 4],
    ]);
    expect(spec('layers/transformer_encoder/_feedforward_output_dense/vars/2')).toEqual([
      'float32',
      [8],
    ]);
    const layers = (
      artifacts.modelTopology as {
        config: {layers: Array<{class_name: string; config: {dtype: unknown}}>};
      }
    ).config.layers;
    const policy = {
      module: 'keras.dtype_policies',
      class_name: 'QuantizedDTypePolicy',
      config: {mode: 'int8', source_name: 'float32'},
      registered_name: null,
    };
    const byClass = (c: string) =>
      layers.filter((l) => l.class_name === c).map((l) => l.config.dtype);
    expect(byClass('Dense')).toEqual([policy]);
    expect(byClass('Embedding')).toEqual([policy]);
    expect(byClass('EinsumDense')).toEqual([policy]);
    // a composite layer keeps a float policy, as Keras 3.15 writes it (its sublayers are int8)
    expect(byClass('TransformerEncoder')).not.toContainEqual(policy);
    // the loader reads the export back: the same predictions, exactly
    const back = await tf.loadLayersModel(tf.io.fromMemory(await convertKerasArtifacts(artifacts)));
    const ids = tf.tensor2d([[1, 5, 9, 0, 29]], [1, 5], 'int32');
    const [y, y2] = [q.predict(ids) as tf.Tensor, back.predict(ids) as tf.Tensor];
    expect(Array.from(y2.dataSync())).toEqual(Array.from(y.dataSync()));
    tf.dispose([ids, y, y2]);
    back.dispose();
    q.dispose();
    model.dispose();
  });

  it('ReversibleEmbedding int8: lookup row / scale, tied logits as Keras computes them', () => {
    const [V, D] = [11, 6];
    const emb = new ReversibleEmbedding({inputDim: V, outputDim: D, quantizationMode: 'int8'});
    emb.build();
    const table = lcg(V * D, 7, 127).map(Math.round);
    const scale = lcg(V, 8, 10).map((v) => 40 + v);
    emb.setWeights([int8Tensor(Int8Array.from(table), [V, D]), tf.tensor1d(scale)]);
    const ids = tf.tensor2d([[0, 4, 10]], [1, 3], 'int32');
    const rows = emb.apply(ids) as tf.Tensor;
    const wantRows = [0, 4, 10].flatMap((id) =>
      Array.from({length: D}, (_, d) => f(table[id * D + d] / scale[id])),
    );
    expect(Array.from(rows.dataSync())).toEqual(wantRows);
    const h = lcg(2 * D, 9);
    const logits = emb.apply(tf.tensor3d(h, [1, 2, D]), {reverse: true}) as tf.Tensor;
    const hq = absMax(2, D, (g, i) => h[g * D + i]);
    const want: number[] = [];
    for (let r = 0; r < 2; r++) {
      for (let v = 0; v < V; v++) {
        let s = 0;
        for (let d = 0; d < D; d++) s += hq.q[r][d] * table[v * D + d];
        want.push(f(f(s) / f(hq.scale[r] * scale[v])));
      }
    }
    expect(Array.from(logits.dataSync())).toEqual(want);
    tf.dispose([ids, rows, logits]);
    emb.weights.forEach((w) => w.dispose());
  });

  it("quantize refuses a model that is already int8, as Keras' 'is already quantized' does", () => {
    const model = buildModel();
    const q = quantize(model, 'int8');
    const before = tf.memory().numTensors;
    // Keras 3.15: "Layer 'x' is already quantized with dtype_policy='int8_from_float32'.
    // Received: mode=int8"; the first int8 layer of the model here is the Embedding 'emb'
    expect(() => quantize(q, 'int8')).toThrow(
      "quantize: layer 'emb' (QuantizedEmbedding) is already quantized with " +
        "dtype_policy='int8_from_float32'; received mode='int8'. Keras refuses to quantize a " +
        'quantized layer again: quantize the float model instead',
    );
    // an int8 layer inside a composite layer counts too: GroupQueryAttention's projections
    const x = tf.input({shape: [3, 4]});
    const gqa = new GroupQueryAttention({headDim: 2, numQueryHeads: 2, numKeyValueHeads: 1});
    const float = tf.model({inputs: x, outputs: gqa.apply([x, x]) as tf.SymbolicTensor});
    const inner = quantize(float, 'int8');
    const held = tf.memory().numTensors;
    expect(() => quantize(inner, 'int8')).toThrow(
      "quantize: layer 'query' (EinsumDense) is already quantized",
    );
    expect(tf.memory().numTensors).toBe(held);
    inner.dispose();
    float.dispose();
    expect(tf.memory().numTensors).toBe(before);
    [model, q].forEach((m) => m.dispose());
  });

  it('errors name what was expected and received', () => {
    const model = buildModel();
    expect(() => quantize(model, 'int2' as 'int8')).toThrow(
      /expected mode 'int8' or 'int4', received "int2"/,
    );
    expect(() => quantize(model, 'int8', {blockSize: 64})).toThrow(
      "blockSize is an int4 option (Keras' Int4QuantizationConfig); received blockSize 64 with mode 'int8'",
    );
    expect(() => quantize(model, 'int4', {blockSize: 0})).toThrow(
      'expected int4BlockSize to be a positive integer or -1 (per channel), received 0',
    );
    expect(
      () =>
        new EinsumDense({
          equation: 'ab,bc->ac',
          outputShape: 2,
          quantizationMode: 'float8' as 'int8',
        }),
    ).toThrow(/expected quantizationMode 'int8', 'int4' or null, received "float8"/);
    const diag = new EinsumDense({
      equation: 'abc,cd->abd',
      outputShape: [null, 2],
      quantizationMode: 'int8',
    });
    diag.build([null, 3, 4]);
    const odd = new EinsumDense({
      equation: '...c,cd->...d',
      outputShape: [2],
      quantizationMode: 'int8',
    });
    expect(() => odd.build([null, 3, 4])).toThrow(
      /int8 cannot take the equation '...c,cd->...d': Keras 3.15 cannot quantize an equation with an ellipsis/,
    );
    diag.weights.forEach((w) => w.dispose());
    model.dispose();
  });
});

describeBackends('int4 layers', () => {
  it('quantize int4: every kernel and table held as Keras holds it, close to the float model; saves and loads back exactly; no leaks', async () => {
    const model = buildModel();
    const q = quantize(model, 'int4', {blockSize: 4});
    const shapes = Object.fromEntries(
      q.weights.map((w) => [w.originalName, `${w.dtype} [${w.shape.join(', ')}]`]),
    );
    // Dense head: kernel [6, 7], packed along units, groups of 4 input rows
    expect(shapes['head/kernel']).toBe('bool [6, 4]');
    expect(shapes['head/kernel_scale']).toBe('float32 [2, 7]');
    expect(shapes['head/kernel_zero']).toBe('bool [2, 7]');
    expect(shapes['head/g_idx']).toBe('float32 [6]');
    // Embedding [30, 8]: packed and grouped along the row
    expect(shapes['emb/embeddings']).toBe('bool [30, 4]');
    expect(shapes['emb/embeddings_scale']).toBe('float32 [30, 2]');
    // EinsumDense abc,cde->abde, kernel [8, 2, 3]: rows 8, cols 6
    expect(shapes['ed/kernel']).toBe('bool [8, 3]');
    expect(shapes['ed/kernel_scale']).toBe('float32 [2, 6]');
    const ids = tf.tensor2d(
      [
        [1, 5, 9, 0, 29],
        [3, 3, 3, 12, 7],
      ],
      [2, 5],
      'int32',
    );
    const y = q.predict(ids) as tf.Tensor;
    const yFloat = model.predict(ids) as tf.Tensor;
    const diff = tf.max(tf.abs(tf.sub(y, yFloat))).dataSync()[0];
    expect(diff).toBeGreaterThan(0);
    const artifacts = await saveToMemory(q);
    const loaded = await tf.loadLayersModel(tf.io.fromMemory(artifacts));
    const before = tf.memory().numTensors;
    const y2 = loaded.predict(ids) as tf.Tensor;
    expect(tf.memory().numTensors).toBe(before + 1);
    expect(Array.from(y2.dataSync())).toEqual(Array.from(y.dataSync()));
    // writing int4 for Keras is not implemented: refused, naming the layer
    await expect(toKeras3Artifacts(artifacts)).rejects.toThrow(
      "layer 'emb' (QuantizedEmbedding) is int4; writing int4 layers for Keras is not implemented",
    );
    tf.dispose([ids, y, y2, yFloat]);
    loaded.dispose();
    q.dispose();
    model.dispose();
  });
});
