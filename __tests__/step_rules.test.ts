/**
 * Compile rules found by class name (src/generate/step_rules.ts): a user's layer class, defined
 * here outside src/, decodes with the eager stepper until its rule is registered through the
 * public API (`registerStepRule`), and then with the compiled step, with the same tokens; a second
 * rule for a class that has one (the package's or a registered one) is refused.
 */
import * as tf from '@tensorflow/tfjs';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {generate, registerStepRule, TokenAndPositionEmbedding, MultiHeadAttention} from '../src';
import type {LayerContract, StepCompile, StepReport} from '../src';

const V = 19;
const D = 8;
const MAX = 10;
type S = tf.SymbolicTensor;

/** A user's position-wise layer: `x + x · kernel` (kernel `[D, D]`). */
class ResidualDense extends tf.layers.Layer {
  static readonly className = 'UserResidualDense';
  static readonly contract: LayerContract = {
    keras: {
      keras3: {pkg: 'my_layers', keys: []},
      keras2: {refused: 'tf-keras 2 has no such layer (a test layer)'},
      call: {kind: 'tensor'},
      kerasOnlyKeys: [],
      refuseConfig: null,
    },
    configSample: () => new ResidualDense(),
    weights: {sublayers: null, keras3Folders: {}, implied: () => ({values: 0, option: 'none'})},
    decoding: {kind: 'positionWise', check: () => null},
    makesKerasMask: () => false,
  };
  kernel: tf.LayerVariable | null = null;

  override build(shape: tf.Shape | tf.Shape[]): void {
    const width = (shape as number[])[2];
    this.kernel = this.addWeight(
      'kernel',
      [width, width],
      'float32',
      tf.initializers.glorotNormal({seed: 3}),
    );
    this.built = true;
  }

  override call(inputs: tf.Tensor | tf.Tensor[], _kwargs: Kwargs): tf.Tensor {
    const x = (Array.isArray(inputs) ? inputs[0] : inputs) as tf.Tensor3D;
    return tf.tidy(() => {
      const [B, T, W] = x.shape;
      const rows = x.reshape([B * T, W]);
      const y = tf.matMul(rows, (this.kernel as tf.LayerVariable).read() as tf.Tensor2D);
      return x.add(y.reshape([B, T, W]));
    });
  }

  override computeOutputShape(shape: tf.Shape | tf.Shape[]): tf.Shape | tf.Shape[] {
    return shape;
  }
}
tf.serialization.registerClass(ResidualDense);

/** Its rule: the same sum through the emitter's ops. */
const residualDense: StepCompile = (layer, [x], emit) => {
  const kernel = emit.weight((layer as ResidualDense).kernel as tf.LayerVariable);
  if ('declined' in kernel) return kernel;
  const act = emit.activation('linear');
  if (act == null) return {declined: 'no linear activation'};
  return [emit.add(x, emit.dense(x, kernel, null, x.width, act))];
};

function model(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  let x = new TokenAndPositionEmbedding({
    vocabularySize: V,
    sequenceLength: MAX,
    embeddingDim: D,
  }).apply(ids) as S;
  x = new MultiHeadAttention({numHeads: 2, keyDim: 4, useCausalMask: true}).apply(x) as S;
  x = new ResidualDense().apply(x) as S;
  const m = tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S});
  const weights = m.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 0.5, 'float32', 7 + i));
  m.setWeights(weights);
  tf.dispose(weights);
  return m;
}

describe('compile rules registered by class name', () => {
  beforeAll(() => tf.setBackend('cpu'));

  it("a user's class compiles once its rule is registered, with the eager stepper's tokens", async () => {
    const m = model();
    try {
      const prompts = [
        [3, 1, 4],
        [5, 9, 2],
      ];
      const reports: StepReport[] = [];
      const onCompile = (r: StepReport) => reports.push(r);
      const recomputed = await generate(m, prompts, {maxLength: MAX, useCache: false});
      const eager = await generate(m, prompts, {maxLength: MAX, useCache: true, onCompile});
      registerStepRule('UserResidualDense', residualDense);
      const compiled = await generate(m, prompts, {maxLength: MAX, useCache: true, onCompile});
      expect(reports.map((r) => r.compiled)).toEqual([false, true]);
      expect(reports[0].reason).toMatch(/\(UserResidualDense\): its class has no compile rule$/);
      expect(reports[1].reason).toBeNull();
      const expected = await recomputed.array();
      expect(await eager.array()).toEqual(expected);
      expect(await compiled.array()).toEqual(expected);
      tf.dispose([recomputed, eager, compiled]);
    } finally {
      m.dispose();
    }
  });

  it('a second rule for a class that has one is refused, saying which class and why', () => {
    expect(() => registerStepRule('MultiHeadAttention', residualDense)).toThrow(
      /registerStepRule: class 'MultiHeadAttention' has a compile rule already \(the package's own\)/,
    );
    expect(() => registerStepRule('Dense', residualDense)).toThrow(
      /class 'Dense' has a compile rule/,
    );
    registerStepRule('UserTwice', residualDense);
    expect(() => registerStepRule('UserTwice', residualDense)).toThrow(
      /class 'UserTwice' has a compile rule already \(registered before\)/,
    );
    expect(() => registerStepRule('', residualDense)).toThrow(/expected a class name/);
  });
});
