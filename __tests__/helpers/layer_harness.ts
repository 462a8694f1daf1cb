/**
 * One test harness for every layer (after Keras' `run_layer_test`): build, symbolic apply, eager
 * apply, a training step with a gradient for every weight, serialization and leak checks.
 */
import * as tf from '@tensorflow/tfjs';

import {expectClose} from './close';
import {saveToMemory} from './save';

export interface LayerCase {
  /** A fresh layer. */
  make: () => tf.layers.Layer;
  /** Input shapes with the batch axis first (used for eager inputs; batch is symbolic). */
  inputShapes: number[][];
  inputDtypes?: Array<'float32' | 'int32' | 'bool'>;
  /** Concrete inputs of those shapes (defaults to seeded random normal floats). */
  makeInputs?: () => tf.Tensor[];
  /** The output shape for the concrete inputs. */
  outputShape: number[];
  /** Shapes of further outputs (e.g. returned attention scores), for the concrete inputs. */
  moreOutputShapes?: number[][];
  /**
   * Call options. Tensors among them become extra model inputs in the symbolic model (as a
   * functional model passes lengths or masks); in eager calls they are passed as given.
   */
  callKwargs?: () => Record<string, unknown>;
  /** False for layers whose output does not depend on the input's values (position tables). */
  inputGradients?: boolean;
  /** Trainable weight count after build. */
  trainableWeights: number;
  /** Expected `originalName`s of the weights (with the layer name `layer`), when given. */
  weightNames?: string[];
}

/** The concrete inputs and call options of one eager call. */
function inputsFor(c: LayerCase): tf.Tensor[] {
  if (c.makeInputs) return c.makeInputs();
  return c.inputShapes.map((s, i) => tf.randomNormal(s, 0, 1, 'float32', 100 + i));
}

function isTensor(x: unknown): x is tf.Tensor {
  return x instanceof tf.Tensor;
}

/** The tensors among the call options, in a fixed order (they are model inputs too). */
function kwargTensors(kwargs: Record<string, unknown>): Array<[string, tf.Tensor]> {
  return Object.entries(kwargs).filter((e): e is [string, tf.Tensor] => isTensor(e[1]));
}

/** Model inputs for `predict`: the layer's inputs, then the call options' tensors. */
function modelInputsFor(c: LayerCase): {xs: tf.Tensor[]; kwargs: Record<string, unknown>} {
  const xs = inputsFor(c);
  const kwargs = c.callKwargs?.() ?? {};
  return {xs: [...xs, ...kwargTensors(kwargs).map(([, t]) => t)], kwargs};
}

function eagerApply(layer: tf.layers.Layer, xs: tf.Tensor[], kwargs: Record<string, unknown>) {
  const y = layer.apply(xs.length === 1 ? xs[0] : xs, kwargs) as tf.Tensor | tf.Tensor[];
  return Array.isArray(y) ? y : [y];
}

function symbolicModel(c: LayerCase): {model: tf.LayersModel; layer: tf.layers.Layer} {
  const layer = c.make();
  const ins = c.inputShapes.map((s, i) =>
    tf.input({shape: s.slice(1), dtype: c.inputDtypes?.[i] ?? 'float32'}),
  );
  const kwargs = c.callKwargs?.() ?? {};
  const symbolicKwargs: Record<string, unknown> = {...kwargs};
  const kwIns = kwargTensors(kwargs).map(([name, t]) => {
    const input = tf.input({
      shape: t.shape.slice(1),
      dtype: t.dtype as 'float32' | 'int32' | 'bool',
    });
    symbolicKwargs[name] = input;
    return input;
  });
  tf.dispose(kwargTensors(kwargs).map(([, t]) => t));
  const out = layer.apply(ins.length === 1 ? ins[0] : ins, symbolicKwargs) as
    tf.SymbolicTensor | tf.SymbolicTensor[];
  return {model: tf.model({inputs: [...ins, ...kwIns], outputs: out}), layer};
}

const outputsOf = (y: tf.Tensor | tf.Tensor[]) => (Array.isArray(y) ? y : [y]);

export function runLayerTest(name: string, c: LayerCase): void {
  describe(`layer harness: ${name}`, () => {
    it('builds on symbolic inputs with the right output shape and weights', () => {
      const {model, layer} = symbolicModel(c);
      const shapes = [c.outputShape, ...(c.moreOutputShapes ?? [])];
      expect(model.outputs.map((o) => o.shape)).toEqual(
        shapes.map((shape) => [null, ...shape.slice(1)]),
      );
      expect(layer.trainableWeights.length).toBe(c.trainableWeights);
      if (c.weightNames) {
        expect(layer.weights.map((w) => w.originalName)).toEqual(
          c.weightNames.map((n) => n.replace(/^layer/, layer.name)),
        );
      }
      model.dispose();
    });

    it('applies eagerly, with the shapes computeOutputShape promised, leaking nothing', () => {
      const layer = c.make();
      const xs = inputsFor(c);
      const kwargs = c.callKwargs?.() ?? {};
      const shapes = [c.outputShape, ...(c.moreOutputShapes ?? [])];
      const ys = eagerApply(layer, xs, kwargs);
      expect(ys.map((y) => y.shape)).toEqual(shapes);
      const promised = layer.computeOutputShape(
        xs.length === 1 ? xs[0].shape : xs.map((x) => x.shape),
      );
      // computeOutputShape sees the layer's inputs alone: its first shape is the output's
      const first = Array.isArray(promised[0]) ? (promised[0] as number[]) : promised;
      expect(first).toEqual(c.outputShape);
      tf.dispose(ys);
      const before = tf.memory().numTensors;
      const again = eagerApply(layer, xs, kwargs);
      // the outputs, and the Keras masks some carry (disposed with them)
      const masks = again.filter((y) => y.kerasMask != null).length;
      expect(tf.memory().numTensors).toBe(before + shapes.length + masks);
      tf.dispose(again);
      expect(tf.memory().numTensors).toBe(before);
      tf.dispose([...xs, ...kwargTensors(kwargs).map(([, t]) => t)]);
      layer.dispose();
    });

    it('trains: gradients reach every weight and float input, and fit lowers the loss', async () => {
      const full = symbolicModel(c).model;
      // trained on the first output (the scores of attention layers follow from it)
      const model = tf.model({inputs: full.inputs, outputs: full.outputs[0]});
      const {xs} = modelInputsFor(c);
      const target = tf.randomNormal(c.outputShape, 0, 1, 'float32', 7);
      const lossOf = (inputs: tf.Tensor[]) => {
        const y = model.apply(inputs, {training: true}) as tf.Tensor;
        return tf.losses.meanSquaredError(target, y) as tf.Scalar;
      };
      // gradients with respect to the float inputs (all layers, weights or not)
      const floatIdx = xs
        .map((x, i) => (x.dtype === 'float32' && c.inputGradients !== false ? i : -1))
        .filter((i) => i >= 0);
      const inputGrads =
        floatIdx.length === 0
          ? []
          : tf.grads((...fl: tf.Tensor[]) => {
              const all = [...xs];
              floatIdx.forEach((i, j) => (all[i] = fl[j]));
              return lossOf(all);
            })(floatIdx.map((i) => xs[i]));
      for (const g of inputGrads) {
        expect(tf.max(tf.abs(g)).dataSync()[0]).toBeGreaterThan(0);
      }
      tf.dispose(inputGrads);
      const vars = model.trainableWeights.map((w) => w.read() as tf.Variable);
      expect(vars.length).toBe(c.trainableWeights);
      if (vars.length === 0) {
        tf.dispose([...xs, target]);
        model.dispose();
        return;
      }
      const {value, grads} = tf.variableGrads(() => lossOf(xs), vars);
      value.dispose();
      for (const v of vars) {
        const g = grads[v.name];
        expect(g).toBeDefined();
        expect(tf.max(tf.abs(g)).dataSync()[0]).toBeGreaterThan(0);
      }
      tf.dispose(Object.values(grads));
      model.compile({optimizer: tf.train.adam(0.02), loss: 'meanSquaredError'});
      const evalLoss = () => {
        const l = model.evaluate(xs, target, {batchSize: c.outputShape[0]}) as tf.Scalar;
        const v = l.dataSync()[0];
        l.dispose();
        return v;
      };
      const before = evalLoss();
      await model.fit(xs, target, {epochs: 20, batchSize: c.outputShape[0], verbose: 0});
      expect(evalLoss()).toBeLessThan(before);
      // after the first fit has created the optimizer's slots, fit and predict leak nothing
      const count = tf.memory().numTensors;
      await model.fit(xs, target, {epochs: 1, batchSize: c.outputShape[0], verbose: 0});
      tf.dispose(model.predict(xs));
      expect(tf.memory().numTensors).toBe(count);
      tf.dispose([...xs, target]);
      model.dispose();
    });

    it('serializes: config round trip, save and load predict identically', async () => {
      const {model, layer} = symbolicModel(c);
      const config = layer.getConfig();
      const entry = tf.serialization.SerializationMap.getMap().classNameMap[layer.getClassName()];
      expect(entry).toBeDefined();
      const clone = entry[1](entry[0], {...config}) as tf.layers.Layer;
      expect(clone.getConfig()).toEqual(config);

      const artifacts = await saveToMemory(model);
      const topology = JSON.stringify(artifacts.modelTopology);
      expect(topology).toContain(`"class_name":"${layer.getClassName()}"`);
      const loaded = await tf.loadLayersModel(tf.io.fromMemory(artifacts));
      expect(loaded.weights.map((w) => w.originalName)).toEqual(
        model.weights.map((w) => w.originalName),
      );
      const {xs} = modelInputsFor(c);
      const a = outputsOf(model.predict(xs));
      const b = outputsOf(loaded.predict(xs));
      expect(b.length).toBe(1 + (c.moreOutputShapes?.length ?? 0));
      b.forEach((t, i) => expectClose(t, a[i], 1e-6, 1e-6));
      tf.dispose([...xs, ...a, ...b]);
      model.dispose();
      loaded.dispose();
    });
  });
}
