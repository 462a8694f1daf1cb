/**
 * The rotary decoders' shared attention core (src/generate/step_rules/rotary_attention.ts):
 * `compileRotaryAttention` on EinsumDense projections with biases (Qwen's), per-head RMS norms of
 * the queries and keys (Qwen 3's, through LlamaLayerNorm's rule), rope or none (SmolLM3's no-rope
 * layers), grouped heads, a sliding window and a soft cap, run over a prefill and single steps
 * with the cache kept between them (the plain-JavaScript kernels), against a float64 loop of the
 * whole computation written here (projections, norms, rotation, windowed softmax, output); Gemma's
 * head-major projections (`btd,ndh->btnh`) compile as the same products.
 */
import * as tf from '@tensorflow/tfjs';

import {EinsumDense} from '../../../src/layers/core/einsum_dense';
import {LlamaLayerNorm} from '../../../src/hub_models/llama3/llama_layer_norm';
import {LLAMA3_STEP_RULES} from '../../../src/hub_models/llama3/llama3_step_rules';
import {jsStepKernels} from '../../../src/kernels/step_kernels_js';
import {ProgramBuilder, type StepProgram} from '../../../src/generate/program_builder';
import {runOp, type OpContext} from '../../../src/generate/step_ops';
import type {StepDecline, StepValue, StepWeight} from '../../../src/generate/step_program';
import {
  compileRotaryAttention,
  type RotaryAttentionParts,
} from '../../../src/generate/step_rules/rotary_attention';
import {values} from '../../helpers/kernel_reference';

const f = Math.fround;
const [D, N, KV, H, V] = [12, 4, 2, 6, 9];

/** A program's runs over one memory (the caches kept), each giving its output's last rows. */
function runner(program: StepProgram, B: number, maxLength: number) {
  const memory = new WebAssembly.Memory({initial: 8});
  let top = 16;
  const alloc = (bytes: number) => {
    const at = top;
    top = (top + bytes + 15) & ~15;
    if (top > memory.buffer.byteLength) {
      memory.grow(Math.ceil((top - memory.buffer.byteLength) / 65536));
    }
    return at;
  };
  const put = (a: Float32Array) => {
    const at = alloc(a.length * 4);
    new Float32Array(memory.buffer, at, a.length).set(a);
    return at;
  };
  const offsets: number[] = [];
  for (const v of program.values) {
    offsets.push(v.aliasOf >= 0 ? offsets[v.aliasOf] : alloc(B * maxLength * v.width * 4));
  }
  const weights = program.weights.map((w) => put(w.dataSync() as Float32Array));
  const constants = program.constants.map(put);
  const caches = program.caches.map((w) => [
    alloc(B * maxLength * w * 4),
    alloc(B * maxLength * w * 4),
  ]);
  const work = alloc(maxLength * 4);
  const kernels = jsStepKernels(memory);
  return (ids: number[][], start: number, t: number): Float32Array => {
    const idView = new Int32Array(memory.buffer, offsets[program.ids], B * t);
    ids.forEach((row, b) =>
      row.slice(start, start + t).forEach((id, i) => (idView[b * t + i] = id)),
    );
    const c: OpContext = {
      kernels,
      B,
      t,
      start,
      maxLength,
      at: (v) => offsets[v],
      w: (i) => (i < 0 ? 0 : weights[i]),
      tensor: () => null,
      backendRowsFrom: 0,
      packed: () => 0,
      constant: (i) => constants[i],
      rowsOf: (v) => (program.values[v].rows === 'all' ? B * t : B),
      isLast: (v) => program.values[v].rows === 'last',
      f32: () => new Float32Array(memory.buffer),
      cache: (i) => [caches[i][0], caches[i][1]],
      keyMask: 0,
      work,
      rowsWork: 0,
    };
    for (const o of program.ops) runOp(o, c);
    const width = program.values[program.logits].width;
    return new Float32Array(memory.buffer, offsets[program.logits], B * width).slice();
  };
}

interface Case {
  /** Gemma's head-major query / key / value kernels. */
  headMajor?: boolean;
  rope: boolean;
  norms: boolean;
  window: number | null;
  softCap: number | null;
}

describe('compileRotaryAttention', () => {
  const made: tf.Tensor[] = [];
  const tensor = (v: Float32Array, shape: number[]) => {
    const t = tf.tensor(v, shape);
    made.push(t);
    return t;
  };
  const table = values(V * D, 1);
  const dense = (
    name: string,
    equation: string,
    shape: number[],
    out: Array<number | null>,
    bias: boolean,
    seed: number,
  ) => {
    const layer = new EinsumDense({
      name,
      equation,
      outputShape: out,
      biasAxes: bias ? equation.split('->')[1].slice(2) : null,
    });
    layer.build(equation.startsWith('abcd') ? [null, null, N, H] : [null, null, D]);
    const size = shape.reduce((a, b) => a * b, 1);
    const kernel = Float32Array.from(values(size, seed), (x) => x * 0.5);
    const ws = [tensor(kernel, shape)];
    const [heads, dim] = [out[1] as number, out[2] as number];
    if (bias) ws.push(tensor(values(heads * dim, seed + 50), [heads, dim]));
    layer.setWeights(ws);
    return {layer, kernel, bias: bias ? (ws[1].dataSync() as Float32Array) : null};
  };
  const q = dense('query', 'abc,cde->abde', [D, N, H], [null, N, H], true, 2);
  const k = dense('key', 'abc,cde->abde', [D, KV, H], [null, KV, H], true, 3);
  const v = dense('value', 'abc,cde->abde', [D, KV, H], [null, KV, H], true, 4);
  const o = dense('attention_output', 'abcd,cde->abe', [N, H, D], [null, D], false, 5);
  /** The same projection with Gemma's head-major kernel `[heads, D, H]` (`btd,ndh->btnh`). */
  const headMajor = (name: string, p: ReturnType<typeof dense>, heads: number) => {
    const layer = new EinsumDense({
      name,
      equation: 'btd,ndh->btnh',
      outputShape: [null, heads, H],
      biasAxes: 'nh',
    });
    layer.build([null, null, D]);
    const kernel = new Float32Array(heads * D * H);
    for (let d = 0; d < D; d++) {
      for (let n = 0; n < heads; n++) {
        for (let j = 0; j < H; j++) kernel[(n * D + d) * H + j] = p.kernel[(d * heads + n) * H + j];
      }
    }
    layer.setWeights([tensor(kernel, [heads, D, H]), tensor(p.bias as Float32Array, [heads, H])]);
    return layer;
  };
  const qHead = headMajor('query_head_major', q, N);
  const kHead = headMajor('key_head_major', k, KV);
  const vHead = headMajor('value_head_major', v, KV);
  const norm = (name: string, seed: number) => {
    const n = new LlamaLayerNorm({name, epsilon: 1e-6});
    n.build([null, null, N, H]);
    const scale = Float32Array.from(values(H, seed), (x) => 1 + 0.5 * x);
    n.setWeights([tensor(scale, [H])]);
    return {layer: n, scale};
  };
  const qNorm = norm('query_norm', 6);
  const kNorm = norm('key_norm', 7);
  const freqs = Float32Array.from({length: H / 2}, (_, j) => f(100 ** (-(2 * j) / H)));
  afterAll(() => {
    // layers never applied: their variables disposed one by one
    for (const l of [q, k, v, o, qNorm, kNorm]) l.layer.weights.forEach((w) => w.dispose());
    for (const l of [qHead, kHead, vHead]) l.weights.forEach((w) => w.dispose());
    tf.dispose(made);
  });

  /** The float64 loop: output rows of every position of `ids` (one batch row). */
  function reference(ids: number[], c: Case): number[][] {
    const proj = (
      x: Float32Array,
      p: {kernel: Float32Array; bias: Float32Array | null},
      n: number,
    ) => {
      const y = new Float64Array(n);
      for (let j = 0; j < n; j++) {
        let s = p.bias ? p.bias[j] : 0;
        for (let i = 0; i < x.length; i++) s += x[i] * p.kernel[i * n + j];
        y[j] = s;
      }
      return y;
    };
    const headNorm = (y: Float64Array, heads: number, scale: Float32Array) => {
      for (let h = 0; h < heads; h++) {
        const part = y.subarray(h * H, (h + 1) * H);
        const ms = part.reduce((a, x) => a + x * x, 0) / H;
        for (let j = 0; j < H; j++) part[j] = (part[j] / Math.sqrt(ms + f(1e-6))) * scale[j];
      }
    };
    const rotate = (y: Float64Array, heads: number, position: number) => {
      const out = new Float64Array(y.length);
      for (let h = 0; h < heads; h++) {
        for (let j = 0; j < H / 2; j++) {
          const a = f(position * freqs[j]);
          const [x1, x2] = [y[h * H + j], y[h * H + j + H / 2]];
          out[h * H + j] = x1 * Math.cos(a) - x2 * Math.sin(a);
          out[h * H + j + H / 2] = x2 * Math.cos(a) + x1 * Math.sin(a);
        }
      }
      return out;
    };
    const qs: Float64Array[] = [];
    const ks: Float64Array[] = [];
    const vs: Float64Array[] = [];
    ids.forEach((id, p) => {
      const x = table.subarray(id * D, (id + 1) * D);
      let qy = proj(x, q, N * H);
      let ky = proj(x, k, KV * H);
      if (c.norms) {
        headNorm(qy, N, qNorm.scale);
        headNorm(ky, KV, kNorm.scale);
      }
      if (c.rope) {
        qy = rotate(qy, N, p);
        ky = rotate(ky, KV, p);
      }
      qs.push(qy);
      ks.push(ky);
      vs.push(proj(x, v, KV * H));
    });
    return ids.map((_, p) => {
      const att = new Float32Array(N * H);
      for (let h = 0; h < N; h++) {
        const g = Math.floor(h / (N / KV));
        const first = c.window == null ? 0 : Math.max(0, p - c.window + 1);
        const scores: number[] = [];
        for (let s = first; s <= p; s++) {
          let dot = 0;
          for (let d = 0; d < H; d++) dot += qs[p][h * H + d] * ks[s][g * H + d];
          let sc = dot / Math.sqrt(H);
          if (c.softCap != null) sc = c.softCap * Math.tanh(sc / c.softCap);
          scores.push(sc);
        }
        const m = Math.max(...scores);
        const e = scores.map((x) => Math.exp(x - m));
        const sum = e.reduce((a, x) => a + x, 0);
        for (let d = 0; d < H; d++) {
          att[h * H + d] = e.reduce((a, w, i) => a + (w / sum) * vs[first + i][g * H + d], 0);
        }
      }
      return Array.from(proj(att, o, D));
    });
  }

  const CASES: Case[] = [
    {rope: true, norms: false, window: null, softCap: null},
    {rope: true, norms: true, window: null, softCap: null},
    {rope: false, norms: false, window: null, softCap: null},
    {rope: true, norms: true, window: 3, softCap: 2},
    {headMajor: true, rope: true, norms: true, window: 2, softCap: null},
  ];
  for (const c of CASES) {
    it(`a prefill of 4 then 3 single steps = the float64 loop (1e-5): ${JSON.stringify(c)}`, () => {
      const builder: ProgramBuilder = new ProgramBuilder(
        (layer, inputs): StepValue[] | StepDecline => {
          const rule = LLAMA3_STEP_RULES[layer.getClassName()];
          return rule == null ? {declined: 'no rule'} : rule(layer, inputs, builder.emit, null);
        },
      );
      const {emit} = builder;
      const x: StepValue = emit.gather(
        builder.ids,
        emit.weight(tensor(table, [V, D])) as StepWeight,
        D,
      );
      const parts: RotaryAttentionParts = {
        query: c.headMajor ? qHead : q.layer,
        key: c.headMajor ? kHead : k.layer,
        value: c.headMajor ? vHead : v.layer,
        output: o.layer,
        queryNorm: c.norms ? qNorm.layer : null,
        keyNorm: c.norms ? kNorm.layer : null,
        heads: N,
        kvHeads: KV,
        headDim: H,
        scale: 1 / Math.sqrt(H),
        inverseFrequencies: c.rope ? freqs : null,
        window: c.window,
        softCap: c.softCap,
      };
      const out = compileRotaryAttention(parts, x, emit);
      if ('declined' in out) throw new Error(out.declined);
      const program = builder.finish(out);
      expect(program.ops.filter((op) => op.op === 'rope').length).toBe(c.rope ? 2 : 0);
      expect(program.ops.filter((op) => op.op === 'rmsNorm').length).toBe(c.norms ? 2 : 0);
      const ids = [[3, 8, 1, 5, 7, 2, 6]];
      const want = reference(ids[0], c);
      const run = runner(program, 1, 8);
      const got = [run(ids, 0, 4), run(ids, 4, 1), run(ids, 5, 1), run(ids, 6, 1)];
      [3, 4, 5, 6].forEach((p, i) => {
        const err = Math.max(...Array.from(got[i]).map((g, j) => Math.abs(g - want[p][j])));
        expect(err).toBeLessThan(1e-5);
      });
    });
  }

  it('a projection that is not one product declines, naming it', () => {
    const builder = new ProgramBuilder(() => ({declined: 'no rule'}));
    const {emit} = builder;
    const x = emit.gather(builder.ids, emit.weight(tensor(table, [V, D])) as StepWeight, D);
    // the heads' axes swapped in the output: not one product of the rows
    const swapped = new EinsumDense({
      name: 'query',
      equation: 'abc,cde->abed',
      outputShape: [null, H, N],
    });
    swapped.build([null, null, D]);
    const out = compileRotaryAttention(
      {
        query: swapped,
        key: k.layer,
        value: v.layer,
        output: o.layer,
        heads: N,
        kvHeads: KV,
        headDim: H,
        scale: 1,
        inverseFrequencies: freqs,
      },
      x,
      emit,
    );
    expect(out).toEqual({
      declined: `its query projection 'abc,cde->abed' with kernel [${D}, ${N}, ${H}] is not a product with a [${D}, D] kernel`,
    });
    swapped.weights.forEach((w) => w.dispose());
  });
});
