import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {fileSystem, MultiHeadAttention} from '../../src';
import {CONFIG_JSON_LIMITS} from '../../src/io/bounded_json';
import {expectClose} from '../helpers/close';

function tmp(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-fs-'));
}

function smallModel(): tf.LayersModel {
  const x = tf.input({shape: [3, 4]});
  const y = new MultiHeadAttention({numHeads: 1, keyDim: 2, name: 'mha'}).apply(
    x,
  ) as tf.SymbolicTensor;
  return tf.model({inputs: x, outputs: y});
}

describe('fileSystem', () => {
  beforeAll(() => tf.setBackend('cpu'));

  it('writes model.json + weights.bin in the tfjs-node layout and loads them back', async () => {
    const dir = tmp();
    const model = smallModel();
    model.compile({optimizer: 'sgd', loss: 'meanSquaredError'});
    model.setUserDefinedMetadata({task: 'test', vocabSize: 7});
    const result = await model.save(fileSystem(`file://${dir}`));
    expect(result.modelArtifactsInfo.weightDataBytes).toBe(
      model.weights.reduce((n, w) => n + 4 * w.shape.reduce((p, d) => p! * d!, 1)!, 0),
    );
    expect(fs.readdirSync(dir).sort()).toEqual(['model.json', 'weights.bin']);
    const json = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
    expect(json.format).toBe('layers-model');
    expect(json.weightsManifest).toEqual([{paths: ['weights.bin'], weights: expect.any(Array)}]);
    expect(json.weightsManifest[0].weights[0].name).toBe('mha/query/kernel');
    expect(json.userDefinedMetadata).toEqual({task: 'test', vocabSize: 7});
    expect(json.trainingConfig).toBeUndefined();
    for (const target of [dir, path.join(dir, 'model.json')]) {
      const loaded = await tf.loadLayersModel(fileSystem(target));
      expect(loaded.getUserDefinedMetadata()).toEqual({task: 'test', vocabSize: 7});
      const x = tf.randomNormal([2, 3, 4]);
      expectClose(loaded.predict(x) as tf.Tensor, model.predict(x) as tf.Tensor, 1e-6, 1e-6);
      loaded.dispose();
    }
    // with the optimizer: the training config and optimizer weights are kept too (adam after
    // a step: its moments hold values that must come back)
    model.compile({optimizer: tf.train.adam(0.01), loss: 'meanSquaredError'});
    await model.fit(tf.randomNormal([2, 3, 4]), tf.randomNormal([2, 3, 4]), {
      epochs: 1,
      verbose: 0,
    });
    await model.save(fileSystem(dir), {includeOptimizer: true});
    const withOpt = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
    expect(withOpt.trainingConfig.loss).toBe('mean_squared_error');
    const reloaded = await tf.loadLayersModel(fileSystem(dir));
    expect(reloaded.optimizer).toBeDefined();
    // the optimizer's weights (iterations, first and second moments) come back with their values
    const saved = await model.optimizer.getWeights();
    const restored = await reloaded.optimizer.getWeights();
    expect(restored.map((w) => w.name)).toEqual(saved.map((w) => w.name));
    expect(saved.length).toBe(1 + 2 * model.trainableWeights.length);
    expect(restored.map((w) => Array.from(w.tensor.dataSync()))).toEqual(
      saved.map((w) => Array.from(w.tensor.dataSync())),
    );
    fs.rmSync(dir, {recursive: true});
  });

  it('loads converter-style sharded weights', async () => {
    const dir = tmp();
    const model = smallModel();
    await model.save(fileSystem(dir));
    const json = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
    const data = fs.readFileSync(path.join(dir, 'weights.bin'));
    const cut = 40;
    fs.writeFileSync(path.join(dir, 'group1-shard1of2.bin'), data.subarray(0, cut));
    fs.writeFileSync(path.join(dir, 'group1-shard2of2.bin'), data.subarray(cut));
    json.weightsManifest[0].paths = ['group1-shard1of2.bin', 'group1-shard2of2.bin'];
    fs.writeFileSync(path.join(dir, 'model.json'), JSON.stringify(json));
    fs.rmSync(path.join(dir, 'weights.bin'));
    const loaded = await tf.loadLayersModel(fileSystem(dir));
    expect(loaded.getWeights().map((w) => w.arraySync())).toEqual(
      model.getWeights().map((w) => w.arraySync()),
    );
    fs.rmSync(dir, {recursive: true});
  });

  it('refuses weight paths that leave the model folder', async () => {
    const dir = tmp();
    await smallModel().save(fileSystem(dir));
    const json = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
    for (const bad of [
      '../weights.bin',
      '/etc/passwd',
      'sub/../../x.bin',
      'http://example.com/w.bin',
    ]) {
      json.weightsManifest[0].paths = [bad];
      fs.writeFileSync(path.join(dir, 'model.json'), JSON.stringify(json));
      await expect(tf.loadLayersModel(fileSystem(dir))).rejects.toThrow(/refusing weights path/);
    }
    fs.rmSync(dir, {recursive: true});
  });

  it("checks model.json's size and depth before parsing it", async () => {
    const dir = tmp();
    const file = path.join(dir, 'model.json');
    const deep = '['.repeat(5000) + ']'.repeat(5000);
    fs.writeFileSync(file, `{"modelTopology": ${deep}, "weightsManifest": []}`);
    await expect(tf.loadLayersModel(fileSystem(dir))).rejects.toThrow(
      `fileSystem: ${file} nests arrays / objects more than ${CONFIG_JSON_LIMITS.maxDepth} deep`,
    );
    const pad = 'x'.repeat(CONFIG_JSON_LIMITS.maxChars);
    fs.writeFileSync(file, `{"modelTopology": {}, "weightsManifest": [], "pad": "${pad}"}`);
    await expect(tf.loadLayersModel(fileSystem(dir))).rejects.toThrow(
      `fileSystem: ${file} holds ${pad.length + 55} bytes; at most ${CONFIG_JSON_LIMITS.maxChars} ` +
        'are read',
    );
    fs.rmSync(dir, {recursive: true});
  });

  it('names missing and malformed files', async () => {
    const dir = tmp();
    await expect(tf.loadLayersModel(fileSystem(dir))).rejects.toThrow(/cannot read .*model.json/);
    fs.writeFileSync(path.join(dir, 'model.json'), '{not json');
    await expect(tf.loadLayersModel(fileSystem(dir))).rejects.toThrow(/is not valid JSON/);
    fs.writeFileSync(path.join(dir, 'model.json'), '{}');
    await expect(tf.loadLayersModel(fileSystem(dir))).rejects.toThrow(/has no modelTopology/);
    expect(() => fileSystem('')).toThrow(/expected a directory or a model.json path/);
    // a file that is neither a folder nor a .json path: named, without ENOTDIR
    fs.writeFileSync(path.join(dir, 'weights.bin'), '');
    await expect(tf.loadLayersModel(fileSystem(path.join(dir, 'weights.bin')))).rejects.toThrow(
      /weights\.bin is a file; expected a folder holding model\.json, or the path of a \.json file$/,
    );
    fs.rmSync(dir, {recursive: true});
  });
});
