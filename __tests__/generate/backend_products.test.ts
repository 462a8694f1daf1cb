/**
 * When the compiled step's float32 products run on the backend's own matmul
 * (src/generate/backend_products.ts): from TENSORFLOW_ROWS_FROM rows on tfjs-node's `tensorflow`
 * backend by default, never on tfjs-wasm's heap (the step's kernels are the wasm module's) nor
 * on cpu unless TFJS_ATTENTION_STEP_BACKEND_ROWS says so. What the products compute is checked in
 * compiled_step.test.ts (the eager stepper's logits, through this path).
 */
import * as tf from '@tensorflow/tfjs';

import {
  backendRowsFrom,
  STEP_BACKEND_ROWS,
  TENSORFLOW_ROWS_FROM,
} from '../../src/generate/backend_products';
import {describeBackends} from '../helpers/backends';

describeBackends('backendRowsFrom', (backend) => {
  afterEach(() => tf.env().set(STEP_BACKEND_ROWS, -1));

  it('by default: from 8 rows on tfjs-node, never on cpu or wasm', () => {
    expect(TENSORFLOW_ROWS_FROM).toBe(8);
    expect(backendRowsFrom('own')).toBe(backend === 'tensorflow' ? 8 : 0);
    expect(backendRowsFrom('heap')).toBe(0);
  });

  it('TFJS_ATTENTION_STEP_BACKEND_ROWS sets the rows (0: never) for a memory of its own, never for the heap', () => {
    tf.env().set(STEP_BACKEND_ROWS, 3);
    expect(backendRowsFrom('own')).toBe(3);
    expect(backendRowsFrom('heap')).toBe(0);
    tf.env().set(STEP_BACKEND_ROWS, 0);
    expect(backendRowsFrom('own')).toBe(0);
  });
});
