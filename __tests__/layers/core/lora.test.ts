/**
 * LoRA on EinsumDense (src/layers/core/lora.ts and EinsumDense's enableLora / disableLora /
 * mergeLora / mergedKernel), against Keras 3's definition written as plain float64 loops:
 * A `kernel.shape[:-1] + [rank]` (he_uniform, limit sqrt(6 / fan_in), fan_in = shape[-2] ·
 * prod(shape[:-2]) as Keras' compute_fans), B `[rank, last]` (zeros), the float kernel
 * `kernel + (alpha / rank) · A @ B`, an int8 layer's `(alpha / rank) · einsum(x, A) @ B` added to
 * its int8 product before the bias and the activation; the gradients of A and B in closed form.
 * Tolerances: 1e-5 absolute on outputs of magnitude ~1 (float32 sums of a few dozen terms),
 * 1e-6 between outputs before and after a merge, 1e-4 on gradients.
 */
import * as tf from '@tensorflow/tfjs';
import type {LayerVariable} from '@tensorflow/tfjs-layers';

import {EinsumDense, quantize} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {lcg} from '../../helpers/data';
import {naiveEinsum} from '../../helpers/naive_einsum';

const prod = (s: number[]) => s.reduce((p, d) => p * d, 1);

/** The sizes of an equation's labels from its two operands' shapes. */
function labelSizes(equation: string, xShape: number[], kShape: number[]): Record<string, number> {
  const [inputs] = equation.split('->');
  const [xl, kl] = inputs.split(',');
  const sizes: Record<string, number> = {};
  [...xl].forEach((l, i) => (sizes[l] = xShape[i]));
  [...kl].forEach((l, i) => (sizes[l] = kShape[i]));
  return sizes;
}

/** `kernel + scale · A @ B` in float64 loops (A `[lead, rank]`, B `[rank, last]`, flat). */
function loopEffectiveKernel(
  kernel: ArrayLike<number>,
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  rank: number,
  last: number,
  scale: number,
): Float64Array {
  const out = new Float64Array(kernel.length);
  const lead = kernel.length / last;
  for (let i = 0; i < lead; i++) {
    for (let j = 0; j < last; j++) {
      let s = 0;
      for (let k = 0; k < rank; k++) s += a[i * rank + k] * b[k * last + j];
      out[i * last + j] = kernel[i * last + j] + scale * s;
    }
  }
  return out;
}

/**
 * einsum(equation, x, w) plus a bias over `biasAxes` (Keras' bias shape: the output axes from the
 * first bias axis on, 1 where an axis is not a bias axis), in float64 loops.
 */
function loopProject(
  equation: string,
  x: ArrayLike<number>,
  xShape: number[],
  w: ArrayLike<number>,
  wShape: number[],
  bias: ArrayLike<number> | null,
  biasAxes: string | null,
): Float64Array {
  const [inputs, output] = equation.split('->');
  const [xl, kl] = inputs.split(',');
  const sizes = labelSizes(equation, xShape, wShape);
  const y = naiveEinsum(
    [
      {labels: xl, data: x},
      {labels: kl, data: w},
    ],
    output,
    sizes,
  );
  if (bias == null || biasAxes == null) return y;
  const first = Math.min(...[...biasAxes].map((l) => output.indexOf(l)));
  const biasLabels = output.slice(first);
  const biasDims = [...biasLabels].map((l) => (biasAxes.includes(l) ? sizes[l] : 1));
  const outDims = [...output].map((l) => sizes[l]);
  for (let flat = 0; flat < y.length; flat++) {
    let rem = flat;
    const idx: number[] = new Array(outDims.length);
    for (let i = outDims.length - 1; i >= 0; i--) {
      idx[i] = rem % outDims[i];
      rem = Math.floor(rem / outDims[i]);
    }
    let off = 0;
    for (let j = 0; j < biasLabels.length; j++) {
      off = off * biasDims[j] + (biasDims[j] === 1 ? 0 : idx[first + j]);
    }
    y[flat] += bias[off];
  }
  return y;
}

/** `scale · einsum(equation, x, A) @ B` in float64 loops: Keras' LoRA term of a quantized layer. */
function loopLoraTerm(
  equation: string,
  x: ArrayLike<number>,
  xShape: number[],
  a: ArrayLike<number>,
  aShape: number[],
  b: ArrayLike<number>,
  rank: number,
  last: number,
  scale: number,
): Float64Array {
  const xa = loopProject(equation, x, xShape, a, aShape, null, null); // [..., rank]
  const rows = xa.length / rank;
  const out = new Float64Array(rows * last);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < last; j++) {
      let s = 0;
      for (let k = 0; k < rank; k++) s += xa[i * rank + k] * b[k * last + j];
      out[i * last + j] = scale * s;
    }
  }
  return out;
}

const values = (v: LayerVariable) => Array.from(v.read().dataSync());

/** Writes seeded values into a variable of the layer (scale keeps outputs of magnitude ~1). */
function fill(v: LayerVariable, seed: number, scale = 0.5): number[] {
  const data = lcg(prod(v.shape as number[]), seed, scale);
  const t = tf.tensor(data, v.shape as number[]);
  v.write(t);
  t.dispose();
  return Array.from(data);
}

interface FloatCase {
  equation: string;
  outputShape: (number | null)[];
  biasAxes: string | null;
  input: number[];
  rank: number;
  alpha?: number;
}

const FLOAT_CASES: FloatCase[] = [
  {equation: 'abc,cde->abde', outputShape: [null, 3, 4], biasAxes: 'de', input: [2, 3, 5], rank: 2},
  {
    equation: 'abc,cde->abde',
    outputShape: [null, 3, 4],
    biasAxes: 'de',
    input: [2, 3, 5],
    rank: 2,
    alpha: 6,
  },
  {
    equation: 'abc,cd->abd',
    outputShape: [null, 4],
    biasAxes: 'd',
    input: [2, 3, 5],
    rank: 3,
    alpha: 1.5,
  },
  {
    equation: 'abcd,cde->abe',
    outputShape: [null, 6],
    biasAxes: null,
    input: [2, 3, 4, 5],
    rank: 2,
    alpha: 8,
  },
  // not of the dense form (the kernel's last axis is contracted): the einsum path
  {
    equation: 'ibd,nd->ibn',
    outputShape: [3, 4],
    biasAxes: null,
    input: [2, 3, 5],
    rank: 2,
    alpha: 3,
  },
];

function built(c: FloatCase, name = 'proj', extra: Record<string, unknown> = {}): EinsumDense {
  const layer = new EinsumDense({
    equation: c.equation,
    outputShape: c.outputShape,
    biasAxes: c.biasAxes ?? undefined,
    name,
    ...extra,
  });
  tf.tidy(() => {
    layer.apply(tf.zeros(c.input));
  });
  return layer;
}

describeBackends('LoRA on EinsumDense', () => {
  it("adds A [...kernel.shape[:-1], rank] and B [rank, last] beside the kernel, named as Keras' ", () => {
    const layer = built(FLOAT_CASES[0], 'proj');
    expect(layer.kernel?.shape).toEqual([5, 3, 4]);
    const before = tf.memory().numTensors;
    layer.enableLora(2);
    expect(tf.memory().numTensors - before).toBe(2);
    const lora = layer.lora!;
    expect(lora.rank).toBe(2);
    expect(lora.a.shape).toEqual([5, 3, 2]);
    expect(lora.b.shape).toEqual([2, 4]);
    expect(lora.a.originalName).toBe('proj/lora_kernel_a');
    expect(lora.b.originalName).toBe('proj/lora_kernel_b');
    expect(lora.a.dtype).toBe('float32');
    expect(lora.b.dtype).toBe('float32');
    layer.dispose();
  });

  it('starts B at zeros and A he_uniform: within sqrt(6 / fan_in), fan_in = shape[-2] · prod(shape[:-2])', () => {
    // kernel [16, 4, 8] -> A [16, 4, 8]: fan_in = 4 · 16 = 64, limit sqrt(6 / 64) = 0.306
    const layer = built({
      equation: 'abc,cde->abde',
      outputShape: [null, 4, 8],
      biasAxes: null,
      input: [1, 2, 16],
      rank: 8,
    });
    layer.enableLora(8);
    const a = values(layer.lora!.a);
    const b = values(layer.lora!.b);
    expect(b.every((v) => v === 0)).toBe(true);
    const limit = Math.sqrt(6 / (4 * 16));
    const maxAbs = Math.max(...a.map(Math.abs));
    // 512 uniform draws: the largest lies above 0.95 · limit unless the limit is another one
    // (fan_in = 16 would give 0.61, fan_in = 4 · 16 · 8 0.11)
    expect(maxAbs).toBeLessThanOrEqual(limit);
    expect(maxAbs).toBeGreaterThan(0.95 * limit);
    const mean = a.reduce((s, v) => s + v, 0) / a.length;
    expect(Math.abs(mean)).toBeLessThan(0.05);
    layer.dispose();
  });

  it('takes its own initializers and alpha; alpha defaults to the rank', () => {
    const layer = built(FLOAT_CASES[0]);
    layer.enableLora(2, {bInitializer: 'ones', aInitializer: 'zeros', alpha: 3});
    expect(values(layer.lora!.a).every((v) => v === 0)).toBe(true);
    expect(values(layer.lora!.b).every((v) => v === 1)).toBe(true);
    expect(layer.lora!.alpha).toBe(3);
    layer.disableLora();
    layer.enableLora(4);
    expect(layer.lora!.alpha).toBe(4);
    layer.dispose();
  });

  describe.each(FLOAT_CASES)(
    'a float $equation (rank $rank, alpha $alpha)',
    ({equation, outputShape, biasAxes, input, rank, alpha}) => {
      it('runs the kernel kernel + (alpha / rank) · A @ B (plain loops, 1e-5)', () => {
        const c = {equation, outputShape, biasAxes, input, rank};
        const layer = built(c);
        const kShape = layer.kernel!.shape as number[];
        const last = kShape[kShape.length - 1];
        const kernel = fill(layer.kernel!, 11);
        const bias = layer.bias != null ? fill(layer.bias, 12) : null;
        layer.enableLora(rank, alpha == null ? undefined : {alpha});
        const a = fill(layer.lora!.a, 13);
        const b = fill(layer.lora!.b, 14); // not zeros, so the update shows
        const scale = (alpha ?? rank) / rank;
        const w = loopEffectiveKernel(kernel, a, b, rank, last, scale);
        const x = Array.from(lcg(prod(input), 15));
        const expected = loopProject(equation, x, input, w, kShape, bias, biasAxes);
        const xt = tf.tensor(x, input);
        const before = tf.memory().numTensors;
        const y = layer.apply(xt) as tf.Tensor;
        expectClose(y, Array.from(expected), 1e-5, 0);
        // the update is not negligible here: without it the output is off by more than 1e-2
        const plain = loopProject(equation, x, input, kernel, kShape, bias, biasAxes);
        const off = Math.max(...expected.map((v, i) => Math.abs(v - plain[i])));
        expect(off).toBeGreaterThan(1e-2);
        y.dispose();
        expect(tf.memory().numTensors).toBe(before);
        xt.dispose();
        layer.dispose();
      });

      it('gives A and B their closed-form gradients for loss = sum(y · r) (plain loops, 1e-4)', () => {
        const c = {equation, outputShape, biasAxes, input, rank};
        const layer = built(c);
        const kShape = layer.kernel!.shape as number[];
        const last = kShape[kShape.length - 1];
        const lead = prod(kShape) / last;
        fill(layer.kernel!, 21);
        if (layer.bias != null) fill(layer.bias, 22);
        layer.enableLora(rank, alpha == null ? undefined : {alpha});
        const a = fill(layer.lora!.a, 23);
        const b = fill(layer.lora!.b, 24);
        const scale = (alpha ?? rank) / rank;
        const x = Array.from(lcg(prod(input), 25));
        const xt = tf.tensor(x, input);
        const yShape = layer.computeOutputShape(input) as number[];
        const r = Array.from(lcg(prod(yShape), 26));
        const rt = tf.tensor(r, yShape);
        // dL/dW = einsum over the equation with the output replaced by r: for W[kernel labels],
        // sum over the other labels of x · r
        const [ins, out] = equation.split('->');
        const [xl, kl] = ins.split(',');
        const sizes = labelSizes(equation, input, kShape);
        const dW = naiveEinsum(
          [
            {labels: xl, data: x},
            {labels: out, data: r},
          ],
          kl,
          sizes,
        );
        // W = K + s · A B (A [lead, rank], B [rank, last]): dA = s · dW Bᵀ, dB = s · Aᵀ dW
        const dA = new Float64Array(lead * rank);
        const dB = new Float64Array(rank * last);
        for (let i = 0; i < lead; i++) {
          for (let k = 0; k < rank; k++) {
            let s = 0;
            for (let j = 0; j < last; j++) s += dW[i * last + j] * b[k * last + j];
            dA[i * rank + k] = scale * s;
          }
        }
        for (let k = 0; k < rank; k++) {
          for (let j = 0; j < last; j++) {
            let s = 0;
            for (let i = 0; i < lead; i++) s += a[i * rank + k] * dW[i * last + j];
            dB[k * last + j] = scale * s;
          }
        }
        const vars = [layer.lora!.a, layer.lora!.b].map((v) => v.read() as tf.Variable);
        const before = tf.memory().numTensors;
        const {value, grads} = tf.variableGrads(
          () => tf.sum(tf.mul(layer.apply(xt) as tf.Tensor, rt)) as tf.Scalar,
          vars,
        );
        expect(Object.keys(grads).length).toBe(2);
        expectClose(grads[vars[0].name], Array.from(dA), 1e-4, 0);
        expectClose(grads[vars[1].name], Array.from(dB), 1e-4, 0);
        value.dispose();
        tf.dispose(Object.values(grads));
        expect(tf.memory().numTensors).toBe(before);
        tf.dispose([xt, rt]);
        layer.dispose();
      });

      it('merges: the same outputs (1e-6), the kernel K + s·AB (1e-6), no A or B left, enables again', () => {
        const c = {equation, outputShape, biasAxes, input, rank};
        const layer = built(c);
        const kShape = layer.kernel!.shape as number[];
        const last = kShape[kShape.length - 1];
        const kernel = fill(layer.kernel!, 31);
        if (layer.bias != null) fill(layer.bias, 32);
        const beforeEnable = tf.memory().numTensors;
        layer.enableLora(rank, alpha == null ? undefined : {alpha});
        const a = fill(layer.lora!.a, 33);
        const b = fill(layer.lora!.b, 34);
        const xt = tf.tensor(lcg(prod(input), 35), input);
        const y0 = layer.apply(xt) as tf.Tensor;
        const merged = layer.mergedKernel();
        const w = loopEffectiveKernel(kernel, a, b, rank, last, (alpha ?? rank) / rank);
        expectClose(merged, Array.from(w), 1e-6, 0);
        merged.dispose();
        layer.mergeLora();
        expect(layer.lora).toBeNull();
        expect(layer.weights.map((v) => v.originalName)).toEqual([
          'proj/kernel',
          ...(layer.bias != null ? ['proj/bias'] : []),
        ]);
        expect(layer.kernel!.trainable).toBe(true);
        expectClose(layer.kernel!.read(), Array.from(w), 1e-6, 0);
        const y1 = layer.apply(xt) as tf.Tensor;
        expectClose(y1, y0, 1e-6, 0);
        tf.dispose([y0, y1, xt]);
        expect(tf.memory().numTensors).toBe(beforeEnable);
        // and LoRA can be enabled again on the merged kernel, under the same names
        layer.enableLora(rank);
        expect(layer.lora!.a.originalName).toBe('proj/lora_kernel_a');
        layer.disableLora();
        layer.dispose();
      });
    },
  );

  it('freezes the kernel only: the bias, A and B train', () => {
    const layer = built(FLOAT_CASES[0]);
    layer.enableLora(2);
    expect(layer.kernel!.trainable).toBe(false);
    expect(layer.trainableWeights.map((v) => v.originalName).sort()).toEqual([
      'proj/bias',
      'proj/lora_kernel_a',
      'proj/lora_kernel_b',
    ]);
    expect(layer.nonTrainableWeights.map((v) => v.originalName)).toEqual(['proj/kernel']);
    layer.dispose();
  });

  it('disableLora removes and frees A and B, and the kernel trains as it did before', () => {
    const layer = built(FLOAT_CASES[0]);
    const kernel = fill(layer.kernel!, 41);
    const before = tf.memory().numTensors;
    layer.enableLora(2);
    fill(layer.lora!.b, 42);
    layer.disableLora();
    expect(layer.lora).toBeNull();
    expect(tf.memory().numTensors).toBe(before);
    expect(layer.weights.map((v) => v.originalName)).toEqual(['proj/kernel', 'proj/bias']);
    expect(layer.trainableWeights.map((v) => v.originalName)).toEqual(['proj/kernel', 'proj/bias']);
    expect(values(layer.kernel!)).toEqual(kernel.map(Math.fround)); // untouched, not merged
    // a kernel frozen before stays frozen after
    layer.kernel!.trainable = false;
    layer.enableLora(2);
    layer.disableLora();
    expect(layer.kernel!.trainable).toBe(false);
    // and disabling again does nothing
    layer.disableLora();
    expect(tf.memory().numTensors).toBe(before);
    layer.dispose();
  });

  describe('refusals (the layer left as it was)', () => {
    const refuse = (layer: EinsumDense, call: () => void, message: string | RegExp) => {
      const before = tf.memory().numTensors;
      const weights = layer.weights.length;
      expect(call).toThrow(message);
      expect(tf.memory().numTensors).toBe(before);
      expect(layer.weights.length).toBe(weights);
    };

    it('a layer not built yet', () => {
      const layer = new EinsumDense({equation: 'abc,cd->abd', outputShape: [null, 4], name: 'p'});
      refuse(
        layer,
        () => layer.enableLora(2),
        "EinsumDense 'p': cannot enable LoRA on a layer that is not built yet",
      );
      expect(layer.lora).toBeNull();
    });

    it('enabling twice (the first adapters kept)', () => {
      const layer = built(FLOAT_CASES[0]);
      layer.enableLora(2);
      const a = layer.lora!.a;
      refuse(
        layer,
        () => layer.enableLora(4),
        "EinsumDense 'proj': LoRA is already enabled (rank 2); only once",
      );
      expect(layer.lora!.a).toBe(a);
      layer.dispose();
    });

    it.each([
      [0, '0'],
      [1.5, '1.5'],
      ['x', 'x'],
      [-2, '-2'],
    ])('rank %p', (rank, shown) => {
      const layer = built(FLOAT_CASES[0]);
      refuse(
        layer,
        () => layer.enableLora(rank as number),
        `EinsumDense 'proj': expected the LoRA rank to be a positive integer, received ${shown}`,
      );
      expect(layer.lora).toBeNull();
      expect(layer.kernel!.trainable).toBe(true);
      layer.dispose();
    });

    it.each([0, -1, NaN])('alpha %p', (alpha) => {
      const layer = built(FLOAT_CASES[0]);
      refuse(
        layer,
        () => layer.enableLora(2, {alpha}),
        `EinsumDense 'proj': expected LoRA alpha to be a positive number, received ${alpha}`,
      );
      layer.dispose();
    });

    it('an unknown option', () => {
      const layer = built(FLOAT_CASES[0]);
      refuse(
        layer,
        () => layer.enableLora(2, {rnak: 4} as never),
        "EinsumDense 'proj': unknown LoRA option(s) rnak; expected alpha, aInitializer, bInitializer",
      );
      layer.dispose();
    });

    it('a kernel with a constraint (as Keras)', () => {
      const layer = built(FLOAT_CASES[0], 'proj', {kernelConstraint: 'nonNeg'});
      refuse(
        layer,
        () => layer.enableLora(2),
        /EinsumDense 'proj': LoRA cannot take a kernel with a constraint .*build the layer without kernelConstraint/,
      );
      expect(layer.kernel!.trainable).toBe(true);
      layer.dispose();
    });
  });

  describe('an int8 EinsumDense (quantize of a functional model)', () => {
    const equation = 'abc,cde->abde';
    const input = [2, 3, 5];

    /** A float model with this layer, its weights seeded, and its int8 form. */
    function int8Model(activation: string): {q: tf.LayersModel; layer: EinsumDense} {
      const x = tf.input({shape: input.slice(1)});
      const dense = new EinsumDense({
        equation,
        outputShape: [null, 3, 4],
        biasAxes: 'de',
        activation,
        name: 'proj',
      });
      const float = tf.model({inputs: x, outputs: dense.apply(x) as tf.SymbolicTensor});
      fill(dense.kernel!, 51);
      fill(dense.bias!, 52, 0.3);
      const q = quantize(float, 'int8');
      float.dispose();
      const layer = q.layers.find((l) => l instanceof EinsumDense) as EinsumDense;
      expect(layer.quantizationMode).toBe('int8');
      return {q, layer};
    }

    it('adds (alpha / rank) · einsum(x, A) @ B after the int8 product, before bias and activation (1e-5)', () => {
      const lin = int8Model('linear');
      const relu = int8Model('relu');
      const x = Array.from(lcg(prod(input), 53));
      const xt = tf.tensor(x, input);
      const plain = lin.q.predict(xt) as tf.Tensor; // the int8 product plus the bias
      const kernelBefore = values(lin.layer.kernel!);
      const rank = 2;
      const alpha = 3;
      for (const m of [lin, relu]) {
        m.layer.enableLora(rank, {alpha});
        fill(m.layer.lora!.a, 54);
        fill(m.layer.lora!.b, 55);
      }
      const a = values(lin.layer.lora!.a);
      const b = values(lin.layer.lora!.b);
      expect(lin.layer.lora!.a.shape).toEqual([5, 3, rank]);
      const term = loopLoraTerm(equation, x, input, a, [5, 3, rank], b, rank, 4, alpha / rank);
      const before = tf.memory().numTensors;
      const yLin = lin.q.predict(xt) as tf.Tensor;
      const yRelu = relu.q.predict(xt) as tf.Tensor;
      const p = plain.dataSync();
      const lin0 = yLin.dataSync();
      expectClose(
        Array.from(term, (_, i) => lin0[i] - p[i]),
        Array.from(term),
        1e-5,
        0,
      );
      const expectedRelu = Array.from(term, (t, i) => Math.max(0, p[i] + t));
      expectClose(yRelu, expectedRelu, 1e-5, 0);
      // the relu cuts some values and the term moves the output
      expect(expectedRelu.filter((v) => v === 0).length).toBeGreaterThan(0);
      expect(Math.max(...term.map(Math.abs))).toBeGreaterThan(1e-2);
      tf.dispose([yLin, yRelu]);
      // the int8 kernel is left as it was
      expect(values(lin.layer.kernel!)).toEqual(kernelBefore);
      expect(tf.memory().numTensors).toBe(before);
      tf.dispose([plain, xt]);
      lin.q.dispose();
      relu.q.dispose();
    });

    it('mergeLora refuses an int8 kernel, saying what it takes, and keeps A and B', () => {
      const {q, layer} = int8Model('linear');
      layer.enableLora(2);
      expect(() => layer.mergeLora()).toThrow(
        "EinsumDense 'proj': mergeLora takes a float kernel; this one is int8",
      );
      expect(layer.lora).not.toBeNull();
      layer.disableLora();
      expect(layer.lora).toBeNull();
      q.dispose();
    });
  });
});
