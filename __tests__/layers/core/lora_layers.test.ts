/**
 * LoRA on Dense, Embedding and ReversibleEmbedding (src/layers/core/dense.ts, embedding.ts,
 * quantized_dense.ts, quantized_embedding.ts, hub/reversible_embedding.ts, through lora.ts'
 * helpers), against Keras 3.15.1 / keras-hub 0.32 (fixtures/lora_layers.py, written to
 * __tests__/fixtures/lora/layers/): each layer built with the fixture's weights (float, int8,
 * int4), `enableLora(2, {alpha: 3})`, A and B set to Keras' (B non-zero), then
 * - the variables' names and what trains, as Keras';
 * - the outputs (1e-5 absolute; values of magnitude ~1, float32 sums of a few terms);
 * - the gradients of `sum(y · w)` w.r.t. A and B (1e-5 absolute);
 * - what Keras' `save_own_variables` writes with LoRA on (`mergedWeights`): float tables within
 *   1e-6; int8 / int4 requantized values exactly and their scales within 1e-6 relative;
 * - no tensor left behind by a call, a gradient or a merge.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import type {LayerVariable} from '@tensorflow/tfjs-layers';

import {
  Dense,
  disableLora,
  Embedding,
  enableLora,
  int8Tensor,
  int8ValuesOf,
  loadLoraWeights,
  LoraLayer,
  mergeLora,
  QuantizedDense,
  QuantizedEmbedding,
  ReversibleEmbedding,
  saveLoraWeights,
} from '../../../src';
import {mergedNamedWeights} from '../../../src/layers/core/lora_model';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';

interface Values {
  shape: number[];
  dtype: string;
  values: number[];
}

interface Fixture {
  case: string;
  rank: number;
  alpha: number;
  mode: 'int8' | 'int4' | null;
  block_size: number | null;
  weights: Record<string, Values>;
  variables: {path: string; shape: number[]; dtype: string}[];
  trainable: string[];
  lora_a: Values;
  lora_b: Values;
  inputs: Values;
  outputs: Values;
  loss_weights: Values;
  grad_a: Values;
  grad_b: Values;
  saved: Values[];
  refusals?: {twice: string; not_built: string; constrained: string};
  units?: number;
  input_dim?: number;
  output_dim?: number;
  tie_weights?: boolean;
  hidden?: Values;
  logits?: Values;
  both_forward_weights?: Values;
  both_reverse_weights?: Values;
  both_grad_a?: Values;
  both_grad_b?: Values;
  inputs_quantizer?: boolean;
}

const DIR = path.join(__dirname, '..', '..', 'fixtures', 'lora', 'layers');
const fixture = (name: string): Fixture =>
  JSON.parse(fs.readFileSync(path.join(DIR, `${name}.json`), 'utf8')) as Fixture;

const tensorOf = (v: Values, dtype: 'float32' | 'int32' = 'float32') =>
  tf.tensor(v.values, v.shape, dtype);

type AnyLora = LoraLayer;

/** The layer's eager call on a tensor. */
const run = (layer: LoraLayer, x: tf.Tensor, kwargs?: Record<string, unknown>): tf.Tensor =>
  layer.apply(x, kwargs) as tf.Tensor;

/** The layer of a fixture's case, built, with Keras' weights (before LoRA) written in. */
function layerOf(f: Fixture): AnyLora {
  const mode = f.mode ?? undefined;
  const block = f.block_size ?? undefined;
  let layer: AnyLora;
  let probe: tf.Tensor;
  if (f.case.startsWith('dense')) {
    const units = f.units as number;
    layer = (mode == null
      ? new Dense({units, name: 'proj'})
      : new QuantizedDense({
          units,
          name: 'proj',
          quantizationMode: mode,
          int4BlockSize: block,
        })) as unknown as AnyLora;
    probe = tf.zeros([1, f.input_dim as number]);
  } else if (f.case.startsWith('embedding')) {
    const [inputDim, outputDim] = [f.input_dim as number, f.output_dim as number];
    layer = (mode == null
      ? new Embedding({inputDim, outputDim, name: 'tokens'})
      : new QuantizedEmbedding({
          inputDim,
          outputDim,
          name: 'tokens',
          quantizationMode: mode,
          int4BlockSize: block,
        })) as unknown as AnyLora;
    probe = tf.zeros([1, 1], 'int32');
  } else {
    layer = new ReversibleEmbedding({
      inputDim: f.input_dim as number,
      outputDim: f.output_dim as number,
      tieWeights: f.tie_weights,
      name: 'token_embedding',
      quantizationMode: mode ?? null,
      int4BlockSize: block,
      // Keras' int4 layer right after quantize("int4", config) has no input quantizer
      int4ReverseInputQuantization: f.inputs_quantizer ?? true,
    }) as unknown as AnyLora;
    probe = tf.zeros([1, 1], 'int32');
  }
  tf.dispose(run(layer, probe));
  probe.dispose();
  for (const v of layer.weights) {
    const w = f.weights[v.originalName];
    if (w == null) throw new Error(`${f.case}: no Keras weight ${v.originalName}`);
    const t =
      v.dtype === 'bool'
        ? int8Tensor(Int8Array.from(w.values), w.shape)
        : tf.tensor(w.values, w.shape, 'float32');
    v.write(t);
    t.dispose();
  }
  return layer;
}

/** The layer with LoRA enabled as the fixture's (rank 2, alpha 3) and Keras' A and B. */
function adapted(f: Fixture): AnyLora {
  const layer = layerOf(f);
  layer.enableLora(f.rank, {alpha: f.alpha});
  const lora = layer.lora!;
  for (const [v, values] of [
    [lora.a, f.lora_a],
    [lora.b, f.lora_b],
  ] as const) {
    const t = tensorOf(values);
    v.write(t);
    t.dispose();
  }
  return layer;
}

const inputOf = (f: Fixture) =>
  tensorOf(f.inputs, f.inputs.dtype.startsWith('int') ? 'int32' : 'float32');

/** The values of a saved weight as Keras writes them (int8 values as numbers). */
function savedValues(t: tf.Tensor): number[] {
  return t.dtype === 'bool' ? Array.from(int8ValuesOf(t)) : Array.from(t.dataSync());
}

const CASES = [
  'dense_float',
  'dense_int8',
  'dense_int4',
  'embedding_float',
  'embedding_int8',
  'embedding_int4',
  'reversible_float_tied',
  'reversible_float_untied',
  'reversible_int8_tied',
  'reversible_int4_tied',
];

describeBackends('LoRA on Dense, Embedding and ReversibleEmbedding (Keras 3.15 fixtures)', () => {
  describe.each(CASES)('%s', (name) => {
    const f = fixture(name);

    it("adds A and B named as Keras' and trains what Keras trains", () => {
      const layer = layerOf(f);
      const before = tf.memory().numTensors;
      layer.enableLora(f.rank, {alpha: f.alpha});
      expect(tf.memory().numTensors - before).toBe(2);
      const names = layer.weights.map((w) => w.originalName);
      expect([...names].sort()).toEqual(f.variables.map((v) => v.path).sort());
      const lora = layer.lora!;
      expect(lora.a.shape).toEqual(f.lora_a.shape);
      expect(lora.b.shape).toEqual(f.lora_b.shape);
      expect([lora.a.dtype, lora.b.dtype]).toEqual(['float32', 'float32']);
      const trainable = layer.trainableWeights.map((w) => w.originalName);
      // the package keeps an int8 / int4 layer's own weights non-trainable (its bias too, which
      // Keras trains): A and B train as in Keras
      const expected =
        f.mode == null
          ? f.trainable
          : f.trainable.filter((p) => p === lora.a.originalName || p === lora.b.originalName);
      expect(trainable.sort()).toEqual([...expected].sort());
      expect(expected).toContain(lora.a.originalName);
      layer.dispose();
    });

    it("gives Keras' outputs (1e-5) and no tensor left behind", () => {
      const layer = adapted(f);
      const x = inputOf(f);
      const before = tf.memory().numTensors;
      const y = run(layer, x);
      expectClose(y, f.outputs.values, 1e-5, 0);
      expect(y.shape).toEqual(f.outputs.shape);
      y.dispose();
      expect(tf.memory().numTensors).toBe(before);
      // the update moves the output: without it the output is another one
      layer.disableLora();
      const plain = run(layer, x);
      const diff = Math.max(
        ...Array.from(plain.dataSync(), (v, i) => Math.abs(v - f.outputs.values[i])),
      );
      expect(diff).toBeGreaterThan(1e-2);
      tf.dispose([plain, x]);
      layer.dispose();
    });

    it("gives Keras' gradients of sum(y · w) w.r.t. A and B (1e-5)", () => {
      const layer = adapted(f);
      const x = inputOf(f);
      const w = tensorOf(f.loss_weights);
      const vars = [layer.lora!.a, layer.lora!.b].map((v) => v.read() as tf.Variable);
      const before = tf.memory().numTensors;
      const {value, grads} = tf.variableGrads(
        () => tf.sum(tf.mul(run(layer, x), w)) as tf.Scalar,
        vars,
      );
      expect(Object.keys(grads).sort()).toEqual(vars.map((v) => v.name).sort());
      expectClose(grads[vars[0].name], f.grad_a.values, 1e-5, 0);
      expectClose(grads[vars[1].name], f.grad_b.values, 1e-5, 0);
      value.dispose();
      tf.dispose(Object.values(grads));
      expect(tf.memory().numTensors).toBe(before);
      tf.dispose([x, w]);
      layer.dispose();
    });

    it("saves what Keras' save_own_variables writes with LoRA on (merged; int8 / int4 requantized)", () => {
      const layer = adapted(f);
      const before = tf.memory().numTensors;
      const merged = layer.mergedWeights();
      // Keras' saved list, matched to the layer's variables by the variables' own order in
      // Keras' variable_serialization_spec: each saved value is one of the layer's weights
      const own = layer.weights.filter((v) => v !== layer.lora!.a && v !== layer.lora!.b);
      expect(own.length).toBe(f.saved.length);
      const order = savedOrder(f, own);
      order.forEach((v, i) => {
        const expected = f.saved[i];
        const t = merged.get(v) ?? v.read();
        expect(t.shape).toEqual(expected.shape);
        if (expected.dtype === 'int8') {
          expect(savedValues(t)).toEqual(expected.values);
        } else {
          expectClose(t, expected.values, 1e-6, 1e-6);
        }
      });
      // the layer's own weights are left as they were
      for (const v of own) {
        const w = f.weights[v.originalName];
        const now = v.dtype === 'bool' ? Array.from(int8ValuesOf(v.read())) : v.read().dataSync();
        expectClose(Array.from(now), w.values, 0, 0);
      }
      tf.dispose([...merged.values()]);
      expect(tf.memory().numTensors).toBe(before);
      layer.dispose();
    });

    if (f.hidden != null) {
      it("gives Keras' reverse logits and gradients through both calls (1e-5)", () => {
        const layer = adapted(f);
        const ids = inputOf(f);
        const hidden = tensorOf(f.hidden!);
        const before = tf.memory().numTensors;
        const logits = run(layer, hidden, {reverse: true});
        expectClose(logits, f.logits!.values, 1e-5, 0);
        logits.dispose();
        const [wf, wr] = [tensorOf(f.both_forward_weights!), tensorOf(f.both_reverse_weights!)];
        const vars = [layer.lora!.a, layer.lora!.b].map((v) => v.read() as tf.Variable);
        const {value, grads} = tf.variableGrads(
          () =>
            tf.add(
              tf.sum(tf.mul(run(layer, ids), wf)),
              tf.sum(tf.mul(run(layer, hidden, {reverse: true}), wr)),
            ) as tf.Scalar,
          vars,
        );
        expectClose(grads[vars[0].name], f.both_grad_a!.values, 1e-5, 0);
        expectClose(grads[vars[1].name], f.both_grad_b!.values, 1e-5, 0);
        value.dispose();
        tf.dispose([...Object.values(grads), wf, wr]);
        expect(tf.memory().numTensors).toBe(before);
        tf.dispose([ids, hidden]);
        layer.dispose();
      });
    }

    if (f.mode == null) {
      it('mergeLora writes the merged weight in, removes A and B, and the output stays (1e-6)', () => {
        const layer = adapted(f);
        const x = inputOf(f);
        const count = layer.weights.length;
        const before = tf.memory().numTensors;
        layer.mergeLora();
        expect(layer.lora).toBeNull();
        expect(layer.weights.length).toBe(count - 2);
        expect(tf.memory().numTensors).toBe(before - 2);
        const y = run(layer, x);
        expectClose(y, f.outputs.values, 1e-5, 0);
        y.dispose();
        // the table / kernel trains again, as before LoRA
        expect(layer.trainableWeights.map((w) => w.originalName).sort()).toEqual(
          f.variables
            .map((v) => v.path)
            .filter((p) => !p.includes('/lora_'))
            .sort(),
        );
        x.dispose();
        layer.dispose();
      });
    } else {
      it('mergeLora and mergedKernel refuse a quantized weight, keeping A and B', () => {
        const layer = adapted(f);
        expect(() => layer.mergeLora()).toThrow(/mergeLora takes a float kernel; this one is int/);
        expect(() => layer.mergedKernel()).toThrow(/mergedWeights\(\) gives what Keras saves/);
        expect(layer.lora).not.toBeNull();
        layer.disableLora();
        expect(layer.lora).toBeNull();
        layer.dispose();
      });
    }

    if (f.refusals != null) {
      it('refuses as Keras does: twice, not built, a constraint (the layer left as it was)', () => {
        const layer = layerOf(f);
        layer.enableLora(2);
        expect(() => layer.enableLora(2)).toThrow(/LoRA is already enabled \(rank 2\); only once/);
        expect(layer.lora!.rank).toBe(2);
        layer.dispose();
        const fresh = f.case.startsWith('dense')
          ? new Dense({units: 3})
          : new Embedding({inputDim: 4, outputDim: 3});
        expect(() => fresh.enableLora(2)).toThrow(
          /cannot enable LoRA on a layer that is not built/,
        );
        const constrained = f.case.startsWith('dense')
          ? new Dense({units: 3, kernelConstraint: 'nonNeg', name: 'c'})
          : new Embedding({inputDim: 4, outputDim: 3, embeddingsConstraint: 'nonNeg', name: 'c'});
        const probe = f.case.startsWith('dense') ? tf.zeros([1, 2]) : tf.zeros([1, 2], 'int32');
        tf.dispose([run(constrained, probe), probe]);
        const option = f.case.startsWith('dense') ? 'kernelConstraint' : 'embeddingsConstraint';
        expect(() => constrained.enableLora(2)).toThrow(
          new RegExp(`build the layer without ${option}`),
        );
        expect(constrained.lora).toBeNull();
        expect(constrained.weights.length).toBe(f.case.startsWith('dense') ? 2 : 1);
        constrained.dispose();
      });
    }
  });
});

/**
 * The layer's own weights in the order Keras' `save_own_variables` writes them (its
 * `variable_serialization_spec`): kernel / embeddings, bias, then the quantized form's scale,
 * zero point and groups; a ReversibleEmbedding's reverse_embeddings after its table's.
 */
function savedOrder(f: Fixture, own: LayerVariable[]): LayerVariable[] {
  const spec = [
    'kernel',
    'bias',
    'embeddings',
    'kernel_scale',
    'embeddings_scale',
    'kernel_zero',
    'embeddings_zero',
    'g_idx',
    'reverse_embeddings',
    'reverse_embeddings_scale',
    'reverse_embeddings_zero',
  ];
  const key = (v: LayerVariable) => v.originalName.slice(v.originalName.lastIndexOf('/') + 1);
  const ordered = [...own].sort((a, b) => spec.indexOf(key(a)) - spec.indexOf(key(b)));
  expect(ordered.map(key).every((k) => spec.includes(k))).toBe(true);
  expect(ordered.length).toBe(f.saved.length);
  return ordered;
}

describeBackends("LoRA's initial A and B on Dense, Embedding and ReversibleEmbedding", () => {
  // Keras' he_uniform: limit sqrt(6 / fan_in), fan_in = A.shape[0] (Dense: inputDim 64; an
  // embedding's A [inputDim, rank]: the vocabulary 96); zeros for B
  const made: [string, () => LoraLayer, number][] = [
    ['Dense', () => new Dense({units: 8}), 64],
    ['QuantizedDense', () => new QuantizedDense({units: 8}), 64],
    ['Embedding', () => new Embedding({inputDim: 96, outputDim: 8}), 96],
    ['QuantizedEmbedding', () => new QuantizedEmbedding({inputDim: 96, outputDim: 8}), 96],
    ['ReversibleEmbedding', () => new ReversibleEmbedding({inputDim: 96, outputDim: 8}), 96],
  ];
  it.each(made)('%s: B zeros, A he_uniform within sqrt(6 / fan_in)', (name, make, fanIn) => {
    const layer = make();
    const probe = name.endsWith('Dense') ? tf.zeros([1, 64]) : tf.zeros([1, 2], 'int32');
    tf.dispose([run(layer, probe), probe]);
    layer.enableLora(8);
    const a = Array.from(layer.lora!.a.read().dataSync());
    const b = Array.from(layer.lora!.b.read().dataSync());
    expect(b.every((v) => v === 0)).toBe(true);
    const limit = Math.sqrt(6 / fanIn);
    const maxAbs = Math.max(...a.map(Math.abs));
    // 512 or 768 uniform draws: the largest lies above 0.95 · limit unless the limit is another
    expect(maxAbs).toBeLessThanOrEqual(limit);
    expect(maxAbs).toBeGreaterThan(0.95 * limit);
    expect(layer.lora!.alpha).toBe(8);
    layer.dispose();
  });
});

describeBackends('LoRA on Dense and Embedding in a model', () => {
  /** ids -> Embedding 'tokens' -> Dense 'query' -> Dense 'value'. */
  function model(): tf.LayersModel {
    const ids = tf.input({shape: [3], dtype: 'int32'});
    const e = new Embedding({inputDim: 7, outputDim: 6, name: 'tokens'}).apply(ids);
    const q = new Dense({units: 5, name: 'query'}).apply(e);
    const v = new Dense({units: 4, name: 'value'}).apply(q);
    return tf.model({inputs: ids, outputs: v as tf.SymbolicTensor});
  }

  it("enableLora(model) adapts Dense targets (keras-hub's defaults) and Embedding ones by name", () => {
    const m = model();
    const adaptedLayers = enableLora(m, 2);
    expect(adaptedLayers.map((l) => l.name)).toEqual(['query', 'value']);
    expect(m.trainableWeights.map((w) => w.originalName).sort()).toEqual(
      [
        'query/bias',
        'query/lora_kernel_a',
        'query/lora_kernel_b',
        'value/bias',
        'value/lora_kernel_a',
        'value/lora_kernel_b',
      ].sort(),
    );
    disableLora(m);
    enableLora(m, 2, {targets: ['tokens']});
    expect(m.trainableWeights.map((w) => w.originalName).sort()).toEqual([
      'tokens/lora_embeddings_a',
      'tokens/lora_embeddings_b',
    ]);
    disableLora(m);
    expect(m.trainableWeights.length).toBe(5);
    m.dispose();
  });

  it('mergedNamedWeights merges each adapted Dense / Embedding (what saving writes), leaving A and B out', () => {
    const m = model();
    enableLora(m, 2, {targets: ['tokens', 'query']});
    const layers = m.layers.filter(
      (l) => (l as unknown as LoraLayer).lora != null,
    ) as unknown as LoraLayer[];
    for (const l of layers) l.lora!.b.write(tf.onesLike(l.lora!.b.read()));
    const before = tf.memory().numTensors;
    const out = mergedNamedWeights(m)!;
    expect(out.named.map((n) => n.name)).toEqual(
      m.weights.filter((w) => !w.originalName.includes('/lora_')).map((w) => w.originalName),
    );
    for (const l of layers) {
      const merged = out.named.find((n) => n.name === l.lora!.base.originalName)!.tensor;
      const expected = l.mergedKernel();
      expectClose(merged, expected, 0, 0);
      // the update is in it
      expect(tf.max(tf.abs(tf.sub(merged, l.lora!.base.read()))).dataSync()[0]).toBeGreaterThan(
        1e-3,
      );
      expected.dispose();
    }
    out.dispose();
    // tf.max / tf.abs / tf.sub above: 3 tensors per layer, disposed here
    expect(tf.memory().numTensors - before).toBe(3 * layers.length);
    mergeLora(m);
    expect(layers.every((l) => l.lora == null)).toBe(true);
    m.dispose();
  });

  it("saveLoraWeights refuses an adapted Embedding (keras-hub's .lora.h5 holds lora_kernel_* only); Dense adapters go both ways", async () => {
    const m = model();
    enableLora(m, 2, {targets: ['tokens', 'query']});
    await expect(saveLoraWeights(m)).rejects.toThrow(
      /layer 'tokens' has LoRA on an embedding table .*keras-hub's .lora.h5 files cannot hold/,
    );
    disableLora(m);
    // Dense targets: lora_kernel_a / _b, as keras-hub writes them; read back into the same targets
    enableLora(m, 2, {targets: ['query', 'value']});
    const layers = m.layers.filter(
      (l) => (l as unknown as LoraLayer).lora != null,
    ) as unknown as LoraLayer[];
    layers.forEach((l, i) => {
      const b = l.lora!.b;
      const t = tf.randomNormal(b.shape as number[], 0, 1, 'float32', 60 + i);
      b.write(t);
      t.dispose();
    });
    const saved = layers.map((l) => [l.lora!.a.read().arraySync(), l.lora!.b.read().arraySync()]);
    const bytes = await saveLoraWeights(m);
    disableLora(m);
    enableLora(m, 2, {targets: ['query', 'value']});
    await loadLoraWeights(m, bytes);
    const again = m.layers.filter(
      (l) => (l as unknown as LoraLayer).lora != null,
    ) as unknown as LoraLayer[];
    expect(again.map((l) => [l.lora!.a.read().arraySync(), l.lora!.b.read().arraySync()])).toEqual(
      saved,
    );
    m.dispose();
  });
});
