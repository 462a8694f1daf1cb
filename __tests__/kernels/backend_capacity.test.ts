/**
 * A model whose weights cannot fit the backend's memory is refused before any weight is allocated
 * (src/kernels/backend_capacity.ts): on tfjs-wasm (at most 4 GiB, TFJS_ATTENTION_WASM_MEMORY_BYTES),
 * by loadKerasHubPreset, loadKerasModel on a .keras file and on a converted model.json, with what
 * the weights need, what the backend holds and what fits.
 */
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import {loadKerasHubPreset, loadKerasModel} from '../../src';
import {Hdf5Reader} from '../../src/io/hdf5_datasets';
import {
  backendCapacity,
  BYTES_PER_WEIGHT,
  checkWeightsFit,
  weightCounts,
} from '../../src/kernels/backend_capacity';
import {WASM_MEMORY_BYTES} from '../../src/kernels/flags';

const FIXTURES = path.join(__dirname, '..', 'fixtures');
const PRESET = path.join(FIXTURES, 'hub_presets', 'gpt2');
const KERAS_FILE = path.join(FIXTURES, 'hub_presets', 'gpt2.keras');
const PLAIN_KERAS = path.join(FIXTURES, 'einsum_int8', 'input_summed_int8.keras');
const MODEL_JSON = path.join(FIXTURES, 'scale', 'reverse', 'tfjs', 'model.json');

describe('checkWeightsFit', () => {
  // Llama 3.2 1B: 1,235,814,400 values; 4 bytes each = 4,943,257,600 bytes
  const llama1b = 1_235_814_400;
  const wasm = {backend: 'wasm', limitBytes: 2 ** 32, usedBytes: 10_000_000};

  it('refuses weights past what is left, naming what they need, what the backend holds and what fits', () => {
    const float = {float: llama1b, int8: 0};
    expect(() => checkWeightsFit('loadKerasHubPreset', 'llama-1b', float, wasm)).toThrow(
      "loadKerasHubPreset: llama-1b does not fit tfjs-wasm's memory: its weights need 4.94 GB " +
        '(1,235,814,400 values held as float32, 4 bytes each), and ' +
        "tfjs-wasm's memory holds at most 4.29 GB, of which 0.01 GB are in use " +
        "(TFJS_ATTENTION_WASM_MEMORY_BYTES). What fits: its int8 form (a preset of Keras' " +
        'model.quantize("int8"): about 1.24 GB, 1 byte a weight value), ' +
        "tfjs-node's 'tensorflow' backend (no such limit), the 'webgl' or 'webgpu' backend " +
        '(weights in GPU memory), or a model of at most 1,071,241,824 float32 weight values.', // (2^32 - 10^7) / 4
    );
  });

  it('counts int8 weights at 1 byte a value: an int8 1B model fits; ten of them do not, and no int8 form is offered', () => {
    const int8 = {float: 266_240, int8: llama1b - 266_240}; // the norms float32
    expect(() => checkWeightsFit('f', 'm', int8, wasm)).not.toThrow();
    const big = {float: 266_240, int8: 10 * llama1b};
    expect(() => checkWeightsFit('f', 'm', big, wasm)).toThrow(
      /its weights need 12\.36 GB \(266,240 float32 values, 4 bytes each, and 12,358,144,000 int8 values, 1 byte each\).*What fits: tfjs-node's/,
    );
    expect(() => checkWeightsFit('f', 'm', big, wasm)).not.toThrow(/int8 form/);
    expect(
      weightCounts([{shape: [2, 3], dtype: 'bool'}, {shape: [4], dtype: 'float32'}, {shape: [5]}]),
    ).toEqual({float: 9, int8: 6});
  });

  it('takes weights up to exactly what is left, and anything where no limit is known', () => {
    const left = (wasm.limitBytes - wasm.usedBytes) / BYTES_PER_WEIGHT;
    expect(() => checkWeightsFit('f', 'm', {float: left, int8: 0}, wasm)).not.toThrow();
    expect(() => checkWeightsFit('f', 'm', {float: left, int8: 1}, wasm)).toThrow(/does not fit/);
    expect(() => checkWeightsFit('f', 'm', {float: llama1b * 10, int8: 0}, null)).not.toThrow();
  });
});

describe('backendCapacity', () => {
  afterAll(() => tf.setBackend('cpu'));

  it('knows no limit on cpu', async () => {
    await tf.setBackend('cpu');
    expect(backendCapacity()).toBeNull();
  });

  it("on wasm: 4 GiB by default (TFJS_ATTENTION_WASM_MEMORY_BYTES), and the tensors' bytes in use", async () => {
    await tf.setBackend('wasm');
    const t = tf.zeros([1000]);
    try {
      expect(backendCapacity()).toEqual({
        backend: 'wasm',
        limitBytes: 4294967296,
        usedBytes: tf.memory().numBytes,
      });
      expect(tf.memory().numBytes).toBeGreaterThanOrEqual(4000);
    } finally {
      t.dispose();
    }
  });
});

describe('loaders refuse a model past tfjs-wasm memory before allocating a weight', () => {
  beforeAll(() => tf.setBackend('wasm'));
  afterEach(() => tf.env().set(WASM_MEMORY_BYTES, 2 ** 32));
  afterAll(() => tf.setBackend('cpu'));

  /** Loads with the limit `room` bytes past what is in use plus `bytes`; the error, or null. */
  async function loadWith(
    load: () => Promise<{dispose(): void}>,
    bytes: number,
    room: number,
  ): Promise<Error | null> {
    tf.env().set(WASM_MEMORY_BYTES, tf.memory().numBytes + bytes + room);
    const before = tf.memory().numTensors;
    try {
      (await load()).dispose();
      expect(tf.memory().numTensors).toBe(before);
      return null;
    } catch (e) {
      expect(tf.memory().numTensors).toBe(before); // nothing allocated, nothing left
      return e as Error;
    }
  }

  const cases: Array<[string, () => Promise<{dispose(): void}>]> = [
    ['loadKerasHubPreset (a preset folder)', () => loadKerasHubPreset(PRESET)],
    ['loadKerasModel (a .keras file)', () => loadKerasModel(KERAS_FILE)],
    ['loadKerasModel (a converted model.json)', () => loadKerasModel(MODEL_JSON)],
  ];

  it.each(cases)(
    '%s: loads with room for its weights, is refused 4 bytes short',
    async (_, load) => {
      // the weights' bytes, from the model itself: what its variables hold
      const model = await load();
      const bytes = (
        'model' in model
          ? (model as unknown as {model: tf.LayersModel}).model
          : (model as tf.LayersModel)
      ).weights.reduce((n, w) => n + w.read().size * 4, 0);
      model.dispose();
      expect(await loadWith(load, bytes, 0)).toBeNull();
      const refused = await loadWith(load, bytes, -4);
      expect(refused?.message).toMatch(
        /^load\w+: .* does not fit tfjs-wasm's memory: its weights need/,
      );
    },
  );

  it('a Keras 3 .keras file is refused before its weights are read from the file', async () => {
    tf.env().set(WASM_MEMORY_BYTES, tf.memory().numBytes + 4);
    const copy = jest.spyOn(Hdf5Reader.prototype, 'copy');
    try {
      await expect(loadKerasModel(PLAIN_KERAS)).rejects.toThrow(
        /^loadKerasModel: the model does not fit tfjs-wasm's memory/,
      );
      expect(copy).not.toHaveBeenCalled();
    } finally {
      copy.mockRestore();
    }
  });
});
