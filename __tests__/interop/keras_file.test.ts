/**
 * Keras files read directly (fixtures/keras_files.py: Keras 3.15 `.keras` files, a folder of
 * Keras 3 shards, a tf-keras 2 `.h5` full model) load with loadKerasModel from a path, bytes, a
 * Blob and a URL, and predict what Keras predicted on the same inputs.
 *
 * Tolerance: atol 1e-5 + rtol 1e-5 (float32; TF and tfjs sum in different orders).
 */
import * as fs from 'fs';
import * as http from 'http';
import type {AddressInfo} from 'net';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {zipSync, unzipSync} from 'fflate';

import {loadKerasModel} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';

const dir = path.join(__dirname, '..', '..', 'fixtures', 'keras_files');
const cases = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith('.io.json'))
  .map((f) => f.slice(0, -'.io.json'.length));

interface TensorJson {
  dtype: string;
  shape: number[];
  data: number[];
}

interface Io {
  format: 'keras' | 'h5' | 'sharded';
  inputs: TensorJson[];
  outputs: TensorJson[];
}

const io = (name: string): Io =>
  JSON.parse(fs.readFileSync(path.join(dir, `${name}.io.json`), 'utf8')) as Io;

/** The file (or folder) of a case. */
function fileOf(name: string): string {
  const {format} = io(name);
  return path.join(dir, format === 'sharded' ? name : `${name}.${format}`);
}

const toTensor = (t: TensorJson) =>
  tf.tensor(t.data, t.shape, t.dtype.startsWith('int') ? 'int32' : 'float32');

/** Predicts the case's inputs and compares with Keras' outputs; disposes all it made. */
function expectKerasOutputs(model: tf.LayersModel, name: string): void {
  const {inputs, outputs} = io(name);
  const x = inputs.map(toTensor);
  const got = model.predict(x.length === 1 ? x[0] : x) as tf.Tensor | tf.Tensor[];
  const list = Array.isArray(got) ? got : [got];
  expect(list.length).toBe(outputs.length);
  outputs.forEach((want, i) => {
    const expected = toTensor(want);
    expect(list[i].shape).toEqual(want.shape);
    expectClose(list[i], expected, 1e-5, 1e-5);
    expected.dispose();
  });
  tf.dispose([...x, ...list]);
}

function bytesOf(name: string): Uint8Array<ArrayBuffer> {
  return new Uint8Array(fs.readFileSync(fileOf(name)));
}

describeBackends('Keras files read directly', () => {
  for (const name of cases) {
    it(`${name}: from a path, predicts as Keras does (atol 1e-5, rtol 1e-5)`, async () => {
      const model = await loadKerasModel(fileOf(name));
      expectKerasOutputs(model, name);
      model.dispose();
    });
  }
});

describe('loadKerasModel reads Keras files directly', () => {
  it('covers .keras files, a sharded folder and a tf-keras 2 .h5 model', () => {
    const formats = cases.map((c) => io(c).format);
    expect(formats.filter((f) => f === 'keras').length).toBeGreaterThanOrEqual(5);
    expect(formats).toContain('h5');
    expect(formats).toContain('sharded');
  });

  it('a .keras file re-zipped with deflate loads the same (entries inflated)', async () => {
    const deflated = zipSync(unzipSync(bytesOf('functional')), {level: 6});
    expect(deflated.length).toBeLessThan(bytesOf('functional').length);
    const model = await loadKerasModel(deflated);
    expectKerasOutputs(model, 'functional');
    model.dispose();
  });

  for (const name of cases.filter((c) => io(c).format !== 'sharded')) {
    it(`${name}: from a Uint8Array, an ArrayBuffer and a Blob`, async () => {
      const bytes = bytesOf(name);
      const buffer = bytes.slice().buffer;
      for (const source of [bytes, buffer, new Blob([bytes])]) {
        const model = await loadKerasModel(source);
        expectKerasOutputs(model, name);
        model.dispose();
      }
    });
  }

  it('reads a File with its name in errors', async () => {
    const file = new File([new Uint8Array([1, 2, 3])], 'mine.keras');
    await expect(loadKerasModel(file)).rejects.toThrow(
      /expected mine\.keras to be a \.keras file .* received 3 bytes starting with 01 02 03/,
    );
  });

  it('leaves no tensor behind after load, predict and dispose', async () => {
    for (const name of ['functional', 'hub_decoder', 'k2_mha_dense', 'sharded']) {
      const before = tf.memory().numTensors;
      const model = await loadKerasModel(fileOf(name));
      expectKerasOutputs(model, name);
      model.dispose();
      expect(tf.memory().numTensors).toBe(before);
    }
  });

  it('reports progress while reading weights: from 0, never decreasing, ending at 1', async () => {
    for (const name of ['hub_decoder', 'k2_mha_dense', 'sharded']) {
      const seen: number[] = [];
      const model = await loadKerasModel(fileOf(name), {onProgress: (f) => seen.push(f)});
      model.dispose();
      expect(seen.length).toBeGreaterThan(2);
      expect(seen[0]).toBe(0);
      expect(seen[seen.length - 1]).toBe(1);
      for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThanOrEqual(seen[i - 1]);
    }
  });

  describe('from a URL (a local http server)', () => {
    let server: http.Server;
    let base: string;
    const served: string[] = [];

    beforeAll(async () => {
      server = http.createServer((req, res) => {
        const name = decodeURIComponent((req.url ?? '/').slice(1).split('?')[0]);
        served.push(name);
        const file = path.join(dir, name);
        if (!/^[\w.]+$/.test(name) || !fs.existsSync(file)) {
          res.writeHead(404, 'Not Found');
          res.end();
          return;
        }
        res.writeHead(200, {'content-type': 'application/octet-stream'});
        res.end(fs.readFileSync(file));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });

    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it('loads a .keras and a .h5 file by URL, fetching only that file', async () => {
      for (const name of ['mha_keywords_masks', 'k2_mha_dense']) {
        served.length = 0;
        const file = path.basename(fileOf(name));
        const model = await loadKerasModel(`${base}/${file}?v=1`);
        expectKerasOutputs(model, name);
        model.dispose();
        expect(served).toEqual([file]);
      }
    });

    it('names the URL and the status when the server refuses', async () => {
      await expect(loadKerasModel(`${base}/missing.keras`)).rejects.toThrow(
        /fetching http:\/\/127\.0\.0\.1:\d+\/missing\.keras: expected status 200, received 404/,
      );
    });
  });
});
