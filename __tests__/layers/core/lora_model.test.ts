/**
 * LoRA on a whole model (src/layers/core/lora_model.ts), as keras-hub 0.32's
 * `backbone.enable_lora(rank, target_layer_names)`: on the tiny GPT-2 and Llama 3 presets of
 * fixtures/lora_finetune.py, the adapted layers are the ones keras-hub adapted (their indices in
 * Keras' flattening order, `lora_enabled_layers`) and the trainable weights keras-hub's; other
 * targets; refusals; disableLora / mergeLora give every weight back its `trainable` and take A and
 * B off; a merge keeps the logits (1e-5 absolute, logits of magnitude ~1).
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import type {LayersModel, LayerVariable} from '@tensorflow/tfjs-layers';

import {
  DEFAULT_LORA_TARGETS,
  disableLora,
  EinsumDense,
  enableLora,
  type KerasHubPreset,
  type LoraLayer,
  mergeLora,
} from '../../../src';
import {loraLayersOf, loraRankOf} from '../../../src/layers/core/lora_model';
import {kerasWeightedLayers} from '../../../src/layers/engine/keras_layer_order';
import {useBackend} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {lcg} from '../../helpers/data';
import {batchOf, loadLoraCase, LORA_DIR, loraExpected} from '../../helpers/lora_fixture';

const trainableNames = (m: LayersModel) => m.trainableWeights.map((w) => w.originalName);
const loraWeightNames = (m: LayersModel) =>
  m.weights.map((w) => w.originalName).filter((n) => n.includes('lora_kernel'));

function logitsOf(model: LayersModel, batch: ReturnType<typeof batchOf>): tf.Tensor {
  return tf.tidy(() => {
    const ids = tf.tensor2d(batch.tokenIds, undefined, 'int32');
    const mask = tf.tensor2d(batch.paddingMask, undefined, 'int32');
    return model.apply([ids, mask]) as tf.Tensor;
  });
}

/** Sets every A and B of the adapted layers to seeded values (B not zero: the update shows). */
function seedAdapters(model: LayersModel): void {
  loraLayersOf(model).forEach(({layer}, i) => {
    for (const [v, seed] of [
      [layer.lora!.a, 100 + 2 * i],
      [layer.lora!.b, 101 + 2 * i],
    ] as [LayerVariable, number][]) {
      const t = tf.tensor(
        lcg(
          v.shape.reduce((p: number, d) => p * (d as number), 1),
          seed,
          0.3,
        ),
        v.shape as number[],
      );
      v.write(t);
      t.dispose();
    }
  });
}

describe('enableLora on a keras-hub preset', () => {
  beforeAll(() => useBackend('cpu'));

  describe.each(['gpt2', 'llama3'] as const)('%s', (c) => {
    const e = loraExpected(c);
    let preset: KerasHubPreset;
    beforeEach(async () => {
      preset = await loadLoraCase(c);
    });
    afterEach(() => preset.dispose());

    it("adapts the layers keras-hub adapts (its indices) and trains keras-hub's weights", () => {
      const model = preset.model;
      expect(loraRankOf(model)).toBeNull();
      const before = tf.memory().numTensors;
      const adapted = enableLora(model, e.rank);
      expect(tf.memory().numTensors - before).toBe(2 * e.lora_enabled_layers.length);
      const weighted = kerasWeightedLayers(model);
      expect(adapted.map((l) => weighted.indexOf(l))).toEqual(e.lora_enabled_layers);
      expect(loraLayersOf(model).map((l) => l.index)).toEqual(e.lora_enabled_layers);
      expect(loraRankOf(model)).toBe(e.rank);
      for (const l of adapted) {
        expect(DEFAULT_LORA_TARGETS).toContain(l.name);
        expect(l.lora!.rank).toBe(e.rank);
        expect(l.lora!.alpha).toBe(e.rank); // keras-hub passes no alpha
        expect((l as unknown as EinsumDense).kernel!.trainable).toBe(false);
      }
      expect(trainableNames(model).sort()).toEqual(e.trainable_variables.map((v) => v.path).sort());
      disableLora(model);
    });

    it('adapts only the targets it is given (key)', () => {
      const model = preset.model;
      const adapted = enableLora(model, 2, {targets: ['key']});
      const weighted = kerasWeightedLayers(model);
      const keys = e.weighted_layers.filter((l) => l.name === 'key');
      expect(adapted.map((l) => weighted.indexOf(l))).toEqual(keys.map((l) => l.index));
      const expected = keys.flatMap((l) =>
        ['lora_kernel_a', 'lora_kernel_b', ...(c === 'gpt2' ? ['bias'] : [])].map(
          (w) => `${l.path}/${w}`,
        ),
      );
      expect(trainableNames(model).sort()).toEqual(expected.sort());
      disableLora(model);
    });

    it('refuses targets that name no LoRA layer, listing the names there are', () => {
      const model = preset.model;
      const trainable = model.weights.map((w) => w.trainable);
      for (const targets of [['nope'], ['layer_norm', 'sequence_output_layernorm']]) {
        let message = '';
        try {
          enableLora(model, 4, {targets});
        } catch (err) {
          message = (err as Error).message;
        }
        expect(message).toContain(
          `enableLora: no layer of '${model.name}' named ${targets.join(', ')} takes LoRA; ` +
            'its layers with weights are named token_embedding, ',
        );
        expect(message).toContain('query');
        expect(message).toContain('feedforward_output_dense');
      }
      expect(() => enableLora(model, 4, {targets: 'query' as never})).toThrow(
        'enableLora: expected targets as an array of layer names, received query',
      );
      expect(() => enableLora(model, 0)).toThrow(
        'enableLora: expected the LoRA rank to be a positive integer, received 0',
      );
      expect(() => enableLora(model, 4, {alpha: -1})).toThrow(
        'enableLora: expected LoRA alpha to be a positive number, received -1',
      );
      // nothing changed
      expect(model.weights.map((w) => w.trainable)).toEqual(trainable);
      expect(loraWeightNames(model)).toEqual([]);
      expect(loraRankOf(model)).toBeNull();
    });

    it('refuses enabling twice, naming the rank it has', () => {
      const model = preset.model;
      enableLora(model, 4);
      const weights = model.weights.length;
      expect(() => enableLora(model, 2)).toThrow(
        `enableLora: LoRA is already enabled on '${model.name}' (rank 4); call disableLora or ` +
          'mergeLora first',
      );
      expect(model.weights.length).toBe(weights);
      disableLora(model);
    });

    it('disableLora gives every weight back its trainable, removes and frees A and B', () => {
      const model = preset.model;
      // a weight frozen before stays frozen after (restored, not set to true)
      model.weights[1].trainable = false;
      const trainable = new Map(model.weights.map((w) => [w, w.trainable]));
      const names = trainableNames(model);
      const before = tf.memory().numTensors;
      enableLora(model, 4);
      disableLora(model);
      expect(tf.memory().numTensors).toBe(before);
      expect(loraWeightNames(model)).toEqual([]);
      expect(model.weights.every((w) => w.trainable === trainable.get(w))).toBe(true);
      expect(model.weights.length).toBe(trainable.size);
      expect(trainableNames(model)).toEqual(names);
      expect(loraRankOf(model)).toBeNull();
      expect(loraLayersOf(model)).toEqual([]);
    });

    it('mergeLora keeps the logits (1e-5), removes A and B, trains what it trained before, enables again', () => {
      const model = preset.model;
      const batch = batchOf(e);
      const names = trainableNames(model);
      const plain = logitsOf(model, batch);
      const before = tf.memory().numTensors;
      enableLora(model, 4);
      seedAdapters(model);
      const adapted = logitsOf(model, batch);
      // the adapters move the logits, so keeping them is not the plain model's logits
      const moved = tf.tidy(() => tf.max(tf.abs(tf.sub(adapted, plain))).dataSync()[0]);
      expect(moved).toBeGreaterThan(1e-2);
      mergeLora(model);
      const merged = logitsOf(model, batch);
      expectClose(merged, adapted, 1e-5, 0);
      expect(loraWeightNames(model)).toEqual([]);
      expect(trainableNames(model)).toEqual(names);
      tf.dispose([adapted, merged]);
      expect(tf.memory().numTensors).toBe(before);
      // the merged model takes LoRA again (the same names)
      enableLora(model, 4);
      expect(loraWeightNames(model).sort()).toEqual(
        e.trainable_variables
          .map((v) => v.path)
          .filter((p) => p.includes('lora_kernel'))
          .sort(),
      );
      disableLora(model);
      plain.dispose();
    });
  });

  /** fixtures/lora_layers.py: keras-hub's enable_lora on Dense and ReversibleEmbedding targets. */
  interface PresetTargets {
    rank: number;
    targets: string[];
    lora_enabled_layers: number[];
    trainable: string[];
    adapters: {
      index: number;
      name: string;
      class: string;
      a: {shape: number[]; values: number[]};
      b: {shape: number[]; values: number[]};
      grad_a: {shape: number[]; values: number[]};
      grad_b: {shape: number[]; values: number[]};
    }[];
    logits: {shape: number[]; values: number[]};
  }

  describe.each(['gpt2', 'llama3', 'llama3_int8'] as const)(
    'Dense and ReversibleEmbedding targets on %s (fixtures/lora_layers.py)',
    (c) => {
      it("adapts keras-hub's layers, trains keras-hub's weights, gives its logits (1e-5) and gradients", async () => {
        const f = JSON.parse(
          fs.readFileSync(path.join(LORA_DIR, 'layers', `preset_${c}.json`), 'utf8'),
        ) as PresetTargets;
        const batch = batchOf(loraExpected(c));
        const preset = await loadLoraCase(c);
        const model = preset.model;
        const trainable = model.weights.map((w) => w.trainable);
        const adapted = enableLora(model, f.rank, {targets: f.targets});
        const weighted = kerasWeightedLayers(model);
        expect(adapted.map((l) => weighted.indexOf(l))).toEqual(f.lora_enabled_layers);
        expect(adapted.map((l) => l.name)).toEqual(f.adapters.map((a) => a.name));
        expect(trainableNames(model).sort()).toEqual([...f.trainable].sort());
        for (const a of f.adapters) {
          const layer = weighted[a.index] as unknown as LoraLayer;
          for (const [v, values] of [
            [layer.lora!.a, a.a],
            [layer.lora!.b, a.b],
          ] as const) {
            expect(v.shape).toEqual(values.shape);
            const t = tf.tensor(values.values, values.shape);
            v.write(t);
            t.dispose();
          }
        }
        const before = tf.memory().numTensors;
        const logits = logitsOf(model, batch);
        expect(logits.shape).toEqual(f.logits.shape);
        expectClose(logits, f.logits.values, 1e-5, 0);
        logits.dispose();
        expect(tf.memory().numTensors).toBe(before);
        // the training path (a gradient recorded: the blocks' plain products): keras-hub's
        // gradients of mean(logits²) w.r.t. each A and B (1e-5 absolute, 1e-4 relative)
        const vars = f.adapters.flatMap((a) => {
          const l = weighted[a.index] as unknown as LoraLayer;
          return [l.lora!.a.read(), l.lora!.b.read()] as tf.Variable[];
        });
        const {value, grads} = tf.variableGrads(
          () => tf.mean(tf.square(logitsOf(model, batch))) as tf.Scalar,
          vars,
        );
        f.adapters.forEach((a, k) => {
          expectClose(grads[vars[2 * k].name], a.grad_a.values, 1e-5, 1e-4);
          expectClose(grads[vars[2 * k + 1].name], a.grad_b.values, 1e-5, 1e-4);
        });
        tf.dispose([value, ...Object.values(grads)]);
        expect(tf.memory().numTensors).toBe(before);
        disableLora(model);
        expect(model.weights.map((w) => w.trainable)).toEqual(trainable);
        preset.dispose();
      });
    },
  );

  it('on the int8 Llama 3: adapts the same layers; mergeLora refuses the int8 kernels, disableLora undoes', async () => {
    const e = loraExpected('llama3_int8');
    const preset = await loadLoraCase('llama3_int8');
    const model = preset.model;
    const trainable = model.weights.map((w) => w.trainable);
    enableLora(model, e.rank);
    expect(loraLayersOf(model).map((l) => l.index)).toEqual(e.lora_enabled_layers);
    expect(trainableNames(model).sort()).toEqual(e.trainable_variables.map((v) => v.path).sort());
    expect(() => mergeLora(model)).toThrow(/mergeLora takes a float kernel; this one is int8/);
    disableLora(model);
    expect(loraWeightNames(model)).toEqual([]);
    expect(model.weights.map((w) => w.trainable)).toEqual(trainable);
    preset.dispose();
  });

  it("on a single layer: Keras' layer.enable_lora; a layer that takes no LoRA is refused", () => {
    const proj = new EinsumDense({equation: 'abc,cd->abd', outputShape: [null, 4], name: 'p'});
    tf.tidy(() => {
      proj.apply(tf.zeros([1, 2, 3]));
    });
    expect(enableLora(proj, 2, {alpha: 4})).toEqual([proj]);
    expect(proj.lora!.alpha).toBe(4);
    mergeLora(proj);
    expect(proj.lora).toBeNull();
    proj.dispose();
    const dense = tf.layers.dense({units: 2, name: 'd'});
    tf.tidy(() => {
      dense.apply(tf.zeros([1, 3]));
    });
    expect(() => enableLora(dense, 2)).toThrow(
      "enableLora: expected a model or a layer that takes LoRA (EinsumDense, Dense, Embedding, ...), received Dense 'd' ('d' is tfjs' own Dense, made by tf.layers.dense: make it with this package's Dense, new Dense({...}), which loaded models have)",
    );
    dense.dispose();
  });
});
