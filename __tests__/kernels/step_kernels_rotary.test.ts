/**
 * The compiled step's kernels for rotary decoders (src/kernels/step_kernels_api.ts): `rope`
 * (keras-hub's RotaryEmbedding), `rmsNorm` over groups with an offset (per-head query / key
 * norms, Gemma's `1 + scale`), `scale`, and attention's sliding window and logit soft cap, each
 * against a plain float64 loop of the formula written here, on the plain-JavaScript kernels and
 * on the WebAssembly SIMD module (a memory of its own, and tfjs-wasm's heap).
 */
import * as tf from '@tensorflow/tfjs';

import type {StepKernels} from '../../src/kernels/step_kernels_api';
import {
  stepKernelsFailure,
  stepKernelsHeapBase,
  stepKernelsMemory,
  stepKernelsOn,
  stepKernelsReady,
} from '../../src/kernels/step_kernels';
import {jsStepKernels} from '../../src/kernels/step_kernels_js';
import {useBackend} from '../helpers/backends';
import {values} from '../helpers/kernel_reference';

const f = Math.fround;

/** Arrays placed one after another (16-aligned) in a memory from `at` on. */
function arena(memory: WebAssembly.Memory, start: number) {
  let at = start;
  const take = (bytes: number) => {
    const here = (at + 15) & ~15;
    at = here + Math.max(bytes, 4);
    const have = memory.buffer.byteLength;
    if (at > have) memory.grow(Math.ceil((at - have) / 65536));
    return here;
  };
  return {
    f32(v: ArrayLike<number>): number {
      const here = take(4 * v.length);
      new Float32Array(memory.buffer, here, v.length).set(v);
      return here;
    },
    u8(v: ArrayLike<number>): number {
      const here = take(v.length);
      new Uint8Array(memory.buffer, here, v.length).set(v);
      return here;
    },
    /** n floats of NaN: an output nothing wrote stays NaN. */
    out(n: number): number {
      return this.f32(new Float32Array(n).fill(NaN));
    },
    read(here: number, n: number): Float32Array {
      return new Float32Array(memory.buffer, here, n).slice();
    },
  };
}
type Arena = ReturnType<typeof arena>;

/** Largest |got - want| / (|want| + 1). */
function relError(got: ArrayLike<number>, want: ArrayLike<number>): number {
  expect(got.length).toBe(want.length);
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const e = Math.abs(got[i] - want[i]) / (Math.abs(want[i]) + 1);
    worst = Number.isNaN(e) ? Infinity : Math.max(worst, e);
  }
  return worst;
}

/**
 * The rotary embedding's formula in float64: row b * t + i at position start + i, angle
 * float32(position * freqs[j]), each head's halves (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin).
 */
function ropeRef(
  x: Float32Array,
  B: number,
  t: number,
  start: number,
  heads: number,
  headDim: number,
  freqs: Float32Array,
): Float64Array {
  const out = new Float64Array(x.length);
  const half = headDim / 2;
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < t; i++) {
      const position = start + i;
      for (let h = 0; h < heads; h++) {
        const o = (b * t + i) * heads * headDim + h * headDim;
        for (let j = 0; j < half; j++) {
          const angle = f(position * freqs[j]);
          const [x1, x2] = [x[o + j], x[o + j + half]];
          out[o + j] = x1 * Math.cos(angle) - x2 * Math.sin(angle);
          out[o + j + half] = x2 * Math.cos(angle) + x1 * Math.sin(angle);
        }
      }
    }
  }
  return out;
}

interface WindowCase {
  B: number;
  t: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  maxLength: number;
  start: number;
  window: number;
  softCap: number;
  mask: boolean;
}

/**
 * Attention over the cache in float64 with a sliding window (the query at position p sees keys
 * p - window + 1 .. p; 0: all up to p) and a soft cap (cap * tanh(s / cap) of each scaled score).
 */
function windowRef(
  c: WindowCase,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  mask: Uint8Array | null,
  scale: number,
): Float64Array {
  const {B, t, heads, kvHeads, headDim, maxLength, start, window, softCap} = c;
  const out = new Float64Array(B * t * heads * headDim);
  const kvw = kvHeads * headDim;
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < t; i++) {
      const p = start + i;
      for (let h = 0; h < heads; h++) {
        const g = Math.floor(h / (heads / kvHeads));
        const qo = (b * t + i) * heads * headDim + h * headDim;
        const kept: number[] = [];
        const scores: number[] = [];
        for (let pos = 0; pos <= p; pos++) {
          if (window > 0 && pos <= p - window) continue;
          if (mask && mask[b * maxLength + pos] === 0) continue;
          let s = 0;
          for (let d = 0; d < headDim; d++) {
            s += q[qo + d] * k[(b * maxLength + pos) * kvw + g * headDim + d];
          }
          s *= scale;
          if (softCap > 0) s = softCap * Math.tanh(s / softCap);
          kept.push(pos);
          scores.push(s);
        }
        const m = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - m));
        const sum = e.reduce((a, x) => a + x, 0);
        for (let d = 0; d < headDim; d++) {
          let acc = 0;
          kept.forEach((pos, n) => {
            acc += (e[n] / sum) * v[(b * maxLength + pos) * kvw + g * headDim + d];
          });
          out[qo + d] = acc;
        }
      }
    }
  }
  return out;
}

function suite(setup: () => {kernels: StepKernels; arena: () => Arena}): void {
  let K: StepKernels;
  let A: Arena;
  beforeEach(() => {
    const s = setup();
    K = s.kernels;
    A = s.arena();
  });

  // [B, t, start, heads, headDim]: one row, a prefill, positions past 1000 (angles of hundreds
  // of turns), odd head counts, a head of 2
  const ROPE: Array<[number, number, number, number, number]> = [
    [1, 1, 0, 3, 8],
    [2, 3, 5, 2, 16],
    [1, 4, 1021, 5, 6],
    [3, 1, 37, 1, 2],
    [1, 2, 131000, 2, 64],
  ];
  for (const [B, t, start, heads, headDim] of ROPE) {
    it(`rope = the formula's float64 loop (1e-6): B ${B}, t ${t}, start ${start}, ${heads} x ${headDim}; in place too`, () => {
      const n = B * t * heads * headDim;
      const xv = Float32Array.from(values(n, 7 + headDim), (v) => 3 * v);
      // keras-hub's frequencies 10000^(-2j / headDim), and 1 (the fastest) first
      const freqs = Float32Array.from({length: headDim / 2}, (_, j) =>
        f(10000 ** (-(2 * j) / headDim)),
      );
      const want = ropeRef(xv, B, t, start, heads, headDim, freqs);
      const x = A.f32(xv);
      const fr = A.f32(freqs);
      const out = A.out(n);
      K.rope(B, t, start, heads, headDim, x, fr, out);
      expect(relError(A.read(out, n), want)).toBeLessThan(1e-6);
      K.rope(B, t, start, heads, headDim, x, fr, x);
      expect(relError(A.read(x, n), want)).toBeLessThan(1e-6);
    });
  }

  it('rope: the position is the row index within its batch row (t rows each), not the row number', () => {
    // the same vector at every row: row b * t + i must equal the one-row rope at start + i
    const [B, t, heads, headDim] = [2, 3, 1, 4];
    const one = values(heads * headDim, 3);
    const xv = new Float32Array(B * t * heads * headDim);
    for (let r = 0; r < B * t; r++) xv.set(one, r * heads * headDim);
    const freqs = new Float32Array([0.9, 0.3]);
    const out = A.out(xv.length);
    K.rope(B, t, 10, heads, headDim, A.f32(xv), A.f32(freqs), out);
    const got = A.read(out, xv.length);
    for (let b = 0; b < B; b++) {
      for (let i = 0; i < t; i++) {
        const want = ropeRef(one, 1, 1, 10 + i, heads, headDim, freqs);
        const row = got.subarray((b * t + i) * 4, (b * t + i + 1) * 4);
        expect(relError(row, want)).toBeLessThan(1e-6);
      }
    }
  });

  it('rmsNorm with groups (rows of groups x part, one scale per part) and an offset (offset + scale) = float64 loops (1e-6)', () => {
    for (const [rows, groups, part, offset] of [
      [1, 1, 9, 0],
      [3, 4, 8, 0],
      [2, 5, 6, 1],
      [4, 1, 771, 1],
      [2, 3, 16, 0.5],
    ]) {
      const dim = groups * part;
      const xv = Float32Array.from(values(rows * dim, dim), (v, i) => v * (1 + (i % 7)));
      const g = values(part, part + 1);
      const eps = 1e-6;
      const want = new Float64Array(rows * dim);
      for (let r = 0; r < rows * groups; r++) {
        const seg = xv.subarray(r * part, (r + 1) * part);
        const ms = seg.reduce((a, x) => a + x * x, 0) / part;
        for (let j = 0; j < part; j++) {
          want[r * part + j] = (seg[j] / Math.sqrt(ms + f(eps))) * (offset + g[j]);
        }
      }
      const out = A.out(rows * dim);
      // groups are rows of the part's width: the op runs the kernel on rows * groups rows
      K.rmsNorm(rows * groups, part, A.f32(xv), A.f32(g), eps, out, offset);
      expect(relError(A.read(out, rows * dim), want)).toBeLessThan(1e-6);
    }
  });

  it('scale: x * factor, exact in float32, in place', () => {
    const n = 203;
    const xv = values(n, 5);
    const x = A.f32(xv);
    const out = A.out(n);
    K.scale(n, x, 0.125, out);
    expect(A.read(out, n)).toEqual(xv.map((v) => f(v * 0.125)));
    K.scale(n, x, f(1 / 3), x);
    expect(A.read(x, n)).toEqual(xv.map((v) => f(v * f(1 / 3))));
  });

  const WINDOWS: WindowCase[] = [
    // one new position past the window: only the last 3 keys
    {
      B: 2,
      t: 1,
      heads: 4,
      kvHeads: 2,
      headDim: 8,
      maxLength: 12,
      start: 9,
      window: 3,
      softCap: 0,
      mask: false,
    },
    // a prefill longer than the window: each query its own last 4
    {
      B: 1,
      t: 7,
      heads: 2,
      kvHeads: 1,
      headDim: 5,
      maxLength: 9,
      start: 0,
      window: 4,
      softCap: 0,
      mask: true,
    },
    // a window of 1: each query sees itself alone (its value row)
    {
      B: 1,
      t: 3,
      heads: 2,
      kvHeads: 2,
      headDim: 4,
      maxLength: 6,
      start: 2,
      window: 1,
      softCap: 0,
      mask: false,
    },
    // a window wider than the prefix: as none
    {
      B: 1,
      t: 2,
      heads: 2,
      kvHeads: 1,
      headDim: 6,
      maxLength: 8,
      start: 1,
      window: 50,
      softCap: 0,
      mask: false,
    },
    // soft caps: large scores squashed (cap 5), with and without a window
    {
      B: 1,
      t: 3,
      heads: 3,
      kvHeads: 1,
      headDim: 7,
      maxLength: 10,
      start: 4,
      window: 0,
      softCap: 5,
      mask: true,
    },
    {
      B: 2,
      t: 2,
      heads: 2,
      kvHeads: 2,
      headDim: 9,
      maxLength: 10,
      start: 6,
      window: 4,
      softCap: 2.5,
      mask: false,
    },
  ];
  for (const c of WINDOWS) {
    it(`attend with a window / soft cap = a float64 loop (1e-5): ${JSON.stringify(c)}`, () => {
      const {B, t, heads, kvHeads, headDim, maxLength, start, window, softCap} = c;
      const kvw = kvHeads * headDim;
      // scores of several units: the soft cap changes them
      const qv = Float32Array.from(values(B * t * heads * headDim, 40 + headDim), (v) => 4 * v);
      const kv = Float32Array.from(values(B * maxLength * kvw, 41 + headDim), (v) => 3 * v);
      const vv = values(B * maxLength * kvw, 42 + headDim);
      const mask = c.mask ? new Uint8Array(B * maxLength).fill(1) : null;
      if (mask) for (let p = 1; p < maxLength; p += 4) mask[p] = 0;
      // keys outside every query's window (and masked ones) hold NaN: reading one shows
      for (let b = 0; b < B; b++) {
        for (let p = 0; p < maxLength; p++) {
          const outside = p > start + t - 1 || (window > 0 && p <= start - window);
          if (outside || (mask && mask[b * maxLength + p] === 0)) {
            for (let d = 0; d < kvw; d++) {
              kv[(b * maxLength + p) * kvw + d] = NaN;
              vv[(b * maxLength + p) * kvw + d] = NaN;
            }
          }
        }
      }
      const scale = f(1 / Math.sqrt(headDim));
      const want = windowRef(c, qv, kv, vv, mask, scale);
      const out = A.out(want.length);
      K.attend(
        B,
        t,
        heads,
        kvHeads,
        headDim,
        maxLength,
        start,
        A.f32(qv),
        A.f32(kv),
        A.f32(vv),
        mask ? A.u8(mask) : 0,
        scale,
        A.out(maxLength),
        out,
        window,
        softCap,
      );
      expect(relError(A.read(out, want.length), want)).toBeLessThan(1e-5);
      if (window > 0 && window <= start) {
        // the same call without the window reads a NaN key: the window is what keeps it out
        K.attend(
          B,
          t,
          heads,
          kvHeads,
          headDim,
          maxLength,
          start,
          A.f32(qv),
          A.f32(kv),
          A.f32(vv),
          mask ? A.u8(mask) : 0,
          scale,
          A.out(maxLength),
          out,
        );
        expect(Array.from(A.read(out, want.length)).some(Number.isNaN)).toBe(true);
      }
      if (softCap > 0) {
        // without the cap the output differs from the capped reference
        K.attend(
          B,
          t,
          heads,
          kvHeads,
          headDim,
          maxLength,
          start,
          A.f32(qv),
          A.f32(kv),
          A.f32(vv),
          mask ? A.u8(mask) : 0,
          scale,
          A.out(maxLength),
          out,
          window,
          0,
        );
        expect(relError(A.read(out, want.length), want)).toBeGreaterThan(1e-3);
      }
    });
  }
}

describe("rotary decoders' step kernels", () => {
  describe('plain JavaScript', () => {
    suite(() => {
      const memory = new WebAssembly.Memory({initial: 4});
      return {kernels: jsStepKernels(memory), arena: () => arena(memory, 16)};
    });
  });

  describe('WebAssembly SIMD, on a memory of its own', () => {
    let kernels: StepKernels;
    let memory: WebAssembly.Memory;
    beforeAll(async () => {
      await useBackend('cpu');
      expect(await stepKernelsReady()).toBe(true);
      memory = stepKernelsMemory(1 << 20);
      const k = stepKernelsOn(memory);
      if (k == null) throw new Error(`no kernels: ${stepKernelsFailure()}`);
      kernels = k;
    });
    suite(() => ({kernels, arena: () => arena(memory, stepKernelsHeapBase())}));
  });

  describe("WebAssembly SIMD, on tfjs-wasm's heap", () => {
    interface WasmParts {
      wasm: {
        _malloc(n: number): number;
        _free(p: number): void;
        asm?: {memory?: WebAssembly.Memory};
        wasmExports?: {memory?: WebAssembly.Memory};
      };
    }
    let backend: WasmParts;
    let kernels: StepKernels;
    let heap: WebAssembly.Memory;
    let blocks: number[] = [];
    beforeAll(async () => {
      await useBackend('wasm');
      expect(await stepKernelsReady()).toBe(true);
      backend = tf.backend() as unknown as WasmParts;
      const m = (backend.wasm.asm ?? backend.wasm.wasmExports)?.memory;
      if (!(m instanceof WebAssembly.Memory)) throw new Error('no wasm heap');
      heap = m;
      kernels = stepKernelsOn(heap)!;
    });
    afterEach(() => {
      for (const p of blocks) backend.wasm._free(p);
      blocks = [];
    });
    afterAll(() => useBackend('cpu'));
    suite(() => ({
      kernels,
      arena: () => {
        const block = backend.wasm._malloc(1 << 20) >>> 0;
        blocks.push(block);
        // an arena that stays inside its block (it never grows the heap)
        return arena(heap, block);
      },
    }));
  });
});
