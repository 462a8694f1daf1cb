/**
 * Loading a model folder on a backend whose memory is not written in place (tfjs-node, webgl,
 * webgpu, or any registered one): the in-place loader must not touch other registered backends.
 * It once asked `tf.findBackend('wasm')` to tell which backend was current, and that call starts
 * tfjs-wasm's asynchronous initialisation where wasm is registered but not yet set up; until it
 * ends every `tf.backend()` throws "Backend '<current>' has not yet been initialized", so loading
 * on tfjs-node failed. A backend registered under another name stands for tfjs-node here.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';
import {MathBackendCPU} from '@tensorflow/tfjs-backend-cpu';

import {fileSystem, loadKerasModel} from '../../src';

const OTHER = 'in-place-other';

beforeAll(async () => {
  tf.registerBackend(OTHER, () => new MathBackendCPU());
  // the cpu kernels, registered for the new backend name
  for (const kernel of tf.getKernelsForBackend('cpu')) {
    tf.registerKernel({...kernel, backendName: OTHER});
  }
  expect(await tf.setBackend(OTHER)).toBe(true);
});

it('loads a folder on another backend without starting wasm (no "not yet initialized")', async () => {
  const source = tf.sequential({
    layers: [tf.layers.dense({inputShape: [3], units: 4, kernelInitializer: 'glorotUniform'})],
  });
  const x = tf.tensor2d([[0.5, -1, 2]]);
  const expected = (source.predict(x) as tf.Tensor).dataSync();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-other-backend-'));
  try {
    await source.save(fileSystem(dir));
    const model = await loadKerasModel(fileSystem(dir));
    expect(tf.getBackend()).toBe(OTHER);
    const got = (model.predict(x) as tf.Tensor).dataSync();
    // the same float32 weights and the same cpu kernels: bit for bit
    expect(Array.from(got)).toEqual(Array.from(expected));
    model.dispose();
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
    source.dispose();
    x.dispose();
  }
});
