/**
 * Compile rules found by class name (src/generate/step_rules.ts): a user's layer class, defined
 * here outside src/, decodes with the eager stepper until its rule is registered through the
 * public API (`registerStepRule`), and then with the compiled step, with the same tokens; a second
 * rule for a class that has one (the package's or a registered one) is refused.
 */
import * as tf from '@tensorflow/tfjs';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {
  defineContract,
  generate,
  MultiHeadAttention,
  registerStepRule,
  TokenAndPositionEmbedding,
} from '../../src';
import type {LayerContract, StepCompile, StepReport} from '../../src';
import {compiledStep} from '../../src/generate/compiled_step';
import type {DecodeStep} from '../../src/generate/decode_loop';
import {compileStep} from '../../src/generate/step_compile';
import {describeBackends} from '../helpers/backends';
import {eagerLogits, maxDiff, planOf} from '../helpers/eager_logits';

const V = 19;
const D = 8;
const MAX = 10;
type S = tf.SymbolicTensor;

/** A user's position-wise layer: `x + x · kernel` (kernel `[D, D]`). */
class ResidualDense extends tf.layers.Layer {
  static readonly className = 'UserResidualDense';
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {pkg: 'my_layers', keys: []},
      keras2: {refused: 'tf-keras 2 has no such layer (a test layer)'},
      call: {kind: 'tensor'},
    },
    configKeys: [],
    decoding: {kind: 'positionWise', check: () => null},
  });
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

/** A user's RMS norm, as keras-hub's LlamaLayerNorm computes it: `x / sqrt(mean(x^2) + eps) * scale` in float32. */
class RmsNorm extends tf.layers.Layer {
  static readonly className = 'UserRmsNorm';
  static readonly contract: LayerContract = {...ResidualDense.contract};
  readonly epsilon = 1e-6;
  scale: tf.LayerVariable | null = null;

  override build(shape: tf.Shape | tf.Shape[]): void {
    const width = (shape as number[])[2];
    this.scale = this.addWeight('scale', [width], 'float32', tf.initializers.ones());
    this.built = true;
  }

  override call(inputs: tf.Tensor | tf.Tensor[], _kwargs: Kwargs): tf.Tensor {
    const x = (Array.isArray(inputs) ? inputs[0] : inputs) as tf.Tensor3D;
    return tf.tidy(() => {
      const variance = tf.mean(tf.square(x), -1, true);
      return x
        .mul(tf.rsqrt(variance.add(this.epsilon)))
        .mul((this.scale as tf.LayerVariable).read());
    });
  }

  override computeOutputShape(shape: tf.Shape | tf.Shape[]): tf.Shape | tf.Shape[] {
    return shape;
  }
}
tf.serialization.registerClass(RmsNorm);

/** Its rule: the emitter's rmsNorm. */
const rmsNorm: StepCompile = (layer, [x], emit) => {
  const norm = layer as RmsNorm;
  if (norm.scale == null) return {declined: 'it is not built'};
  const scale = emit.weight(norm.scale);
  return 'declined' in scale ? scale : [emit.rmsNorm(x, scale, norm.epsilon)];
};

/** Token and position embedding, causal attention and an RMS norm before the logits. */
function rmsModel(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  let x = new TokenAndPositionEmbedding({
    vocabularySize: V,
    sequenceLength: MAX,
    embeddingDim: D,
  }).apply(ids) as S;
  x = new RmsNorm().apply(x) as S;
  x = new MultiHeadAttention({numHeads: 2, keyDim: 4, useCausalMask: true}).apply(x) as S;
  x = new RmsNorm().apply(x) as S;
  const m = tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S});
  const weights = m.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 0.7, 'float32', 3 + i));
  m.setWeights(weights);
  tf.dispose(weights);
  return m;
}

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

registerStepRule('UserRmsNorm', rmsNorm);

describeBackends('rmsNorm in the compiled step, through a rule registered here', () => {
  afterEach(() => tf.env().set('TFJS_ATTENTION_SIMD', true));

  for (const kernels of ['simd', 'js'] as const) {
    it(`gives the eager stepper's logits (1e-5) and generate's tokens of recomputing (${kernels} kernels)`, async () => {
      tf.env().set('TFJS_ATTENTION_SIMD', kernels === 'simd');
      const m = rmsModel();
      try {
        const plan = planOf(m);
        const {program} = compileStep(plan);
        expect(program?.ops.filter((o) => o.op === 'rmsNorm').length).toBe(2);
        const ids = [
          [3, 1, 4, 1, 5, 9, 2, 6, 5, 3],
          [2, 7, 1, 8, 2, 8, 1, 8, 2, 8],
        ];
        const lengths = [3, 5];
        const eager = eagerLogits(plan, ids, lengths, MAX);
        const made = compiledStep(plan, ids, lengths, MAX);
        expect(made.reason).toBeNull();
        const step = made.step as DecodeStep;
        const compiled: Float32Array[][] = [];
        try {
          for (let index = Math.min(...lengths); index < MAX; index++) {
            const active = lengths.map((n) => index >= n);
            compiled.push(step.next(ids, index, active) as Float32Array[]);
          }
        } finally {
          step.dispose();
        }
        expect(made.report.run?.kernels).toBe(kernels);
        expect(maxDiff(eager, compiled)).toBeLessThan(1e-5);
        const prompts = ids.map((r) => r.slice(0, 3));
        const reports: StepReport[] = [];
        const cached = await generate(m, prompts, {
          maxLength: MAX,
          useCache: true,
          onCompile: (r) => reports.push(r),
        });
        const recomputed = await generate(m, prompts, {maxLength: MAX, useCache: false});
        expect(reports.map((r) => r.compiled)).toEqual([true]);
        expect(await cached.array()).toEqual(await recomputed.array());
        tf.dispose([cached, recomputed]);
      } finally {
        m.dispose();
      }
    });
  }
});
