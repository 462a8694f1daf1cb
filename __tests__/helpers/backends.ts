/**
 * Runs a suite once per available backend: cpu and wasm always, tfjs-node's `tensorflow` backend
 * when `@tensorflow/tfjs-node` loads (it is optional and never required).
 */
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

function tfjsNodeLoads(): boolean {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional, detected at run time
    require('@tensorflow/tfjs-node');
    return true;
  } catch {
    return false;
  }
}

export const BACKENDS: string[] = ['cpu', 'wasm', ...(tfjsNodeLoads() ? ['tensorflow'] : [])];

export async function useBackend(name: string): Promise<void> {
  const ok = await tf.setBackend(name);
  if (!ok) {
    throw new Error(`backend ${name} failed to initialise`);
  }
  await tf.ready();
}

/** `describe` once per backend, with the backend set before the suite's tests run. */
export function describeBackends(name: string, fn: (backend: string) => void): void {
  for (const backend of BACKENDS) {
    describe(`${name} [${backend}]`, () => {
      beforeAll(() => useBackend(backend));
      fn(backend);
    });
  }
}

/** Runs `fn` and checks that it left no tensor behind. */
export async function expectNoLeak(fn: () => unknown): Promise<void> {
  const before = tf.memory().numTensors;
  await fn();
  expect(tf.memory().numTensors).toBe(before);
}
