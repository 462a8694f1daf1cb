/**
 * The one choice of the compiled step's kernels (src/generate/step_kernels_choice.ts): the SIMD
 * module of the whole step where it loaded, else the plain-JavaScript loops alone: no product is
 * handed to the other SIMD module's sgemm (the JavaScript + sgemm hybrid is gone).
 */
// jest.mock is hoisted above the imports: the choice below sees the mocked modules
import {chooseStepKernels} from '../../src/generate/step_kernels_choice';
import {jsStepKernels} from '../../src/kernels/step_kernels_js';

const sgemmCalls: unknown[][] = [];

// the step's SIMD module unavailable, the sgemm module loaded (the case the hybrid served)
jest.mock('../../src/kernels/step_kernels', () => ({stepKernelsOn: () => null}));
jest.mock('../../src/kernels/wasm_kernels', () => ({
  kernelsOnMemory: () => ({
    sgemm: (...args: unknown[]) => sgemmCalls.push(args),
    sgemmWorkBytes: () => 1024,
  }),
}));

describe('chooseStepKernels', () => {
  it("without the step's SIMD module: the JavaScript loops for every product, 1 to 8 rows", () => {
    const memory = new WebAssembly.Memory({initial: 4});
    const K = chooseStepKernels(memory);
    const js = jsStepKernels(memory);
    expect(K.kind).toBe('js');
    const [k, n] = [37, 19];
    const f32 = new Float32Array(memory.buffer);
    const x = 1024;
    const w = x + 8 * k * 4; // [k, n] for dense, read as [n, k] for denseT
    const out = w + k * n * 4;
    const ref = out + 8 * n * 4;
    for (let i = 0; i < 8 * k; i++) f32[x / 4 + i] = Math.sin(i * 1.3);
    for (let i = 0; i < k * n; i++) f32[w / 4 + i] = Math.cos(i * 0.7);
    const rowsOf = (at: number, rows: number) =>
      Array.from(f32.subarray(at / 4, at / 4 + rows * n));
    for (let rows = 1; rows <= 8; rows++) {
      K.dense(rows, k, n, x, w, 0, 0, out);
      js.dense(rows, k, n, x, w, 0, 0, ref);
      expect([rows, rowsOf(out, rows)]).toEqual([rows, rowsOf(ref, rows)]);
      K.denseT(rows, k, n, x, w, out);
      js.denseT(rows, k, n, x, w, ref);
      expect([rows, rowsOf(out, rows)]).toEqual([rows, rowsOf(ref, rows)]);
    }
    expect(sgemmCalls).toEqual([]);
  });
});
