/**
 * The benchmark's anchor (bench/onnx_attention.ts): the ONNX graph written from a
 * MultiHeadAttention's weights, run by onnxruntime-node, equals the layer within 1e-5 absolute +
 * 1e-5 relative, unmasked and with valid lengths as an additive mask.
 */
import * as tf from '@tensorflow/tfjs';
import * as ort from 'onnxruntime-node';

import {additiveMask, attentionModel, closeness} from '../../bench/onnx_attention';
import {MultiHeadAttention} from '../../src';

const size = {batch: 2, tokens: 8, width: 16, heads: 4};
const {batch: B, tokens: T, width: D, heads: H} = size;

let layer: MultiHeadAttention;
let x: tf.Tensor;
let lens: tf.Tensor;
let weights: Float32Array[];

beforeAll(async () => {
  await tf.setBackend('cpu');
  x = tf.randomNormal([B, T, D], 0, 1, 'float32', 3);
  lens = tf.tensor1d([5, 8], 'int32');
  layer = new MultiHeadAttention({numHeads: H, keyDim: D / H, biasInitializer: 'randomNormal'});
  tf.dispose(layer.apply(x) as tf.Tensor);
  weights = layer.getWeights().map((w) => w.dataSync() as Float32Array);
});

afterAll(() => {
  tf.dispose([x, lens]);
  layer.dispose();
});

async function runOnnx(model: Uint8Array, mask: boolean): Promise<Float32Array> {
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
  });
  const feeds: Record<string, ort.Tensor> = {
    x: new ort.Tensor('float32', x.dataSync() as Float32Array, [B, T, D]),
  };
  if (mask) {
    feeds.mask = new ort.Tensor('float32', additiveMask(lens.dataSync(), T), [B, 1, 1, T]);
  }
  const y = (await session.run(feeds)).y;
  await session.release();
  expect(y.dims).toEqual([B, T, D]);
  return y.data as Float32Array;
}

test('onnxruntime-node runs the same attention as MultiHeadAttention', async () => {
  const ours = (layer.apply(x) as tf.Tensor).dataSync();
  expect(closeness(await runOnnx(attentionModel(size, weights), false), ours)).toBeLessThanOrEqual(
    1,
  );
});

test('with valid lengths as an additive mask', async () => {
  const ours = (layer.apply(x, {validLens: lens}) as tf.Tensor).dataSync();
  const onnx = await runOnnx(attentionModel(size, weights, {mask: true}), true);
  expect(closeness(onnx, ours)).toBeLessThanOrEqual(1);
});

test('the check catches a wrong graph (no 1/sqrt(keyDim) scale)', async () => {
  const ours = (layer.apply(x) as tf.Tensor).dataSync();
  const wrong = await runOnnx(attentionModel(size, weights, {scale: 1}), false);
  expect(closeness(wrong, ours)).toBeGreaterThan(1);
});
