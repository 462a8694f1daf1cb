/**
 * Loading reads nothing outside the model folder, never hangs, allocates only what the files
 * declare, and refuses what a model file should not be able to do: links out, FIFOs, devices,
 * size mismatches, repeated files, a missing or malformed manifest, a dangling graph node, and
 * configs that imply absurd weight sizes.
 */
import {execFileSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  convertKerasArtifacts,
  fileSystem,
  loadKerasHubPreset,
  loadKerasModel,
  MultiHeadAttention,
} from '../../src';

function tmp(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-load-'));
}

async function savedModel(): Promise<string> {
  const dir = tmp();
  const x = tf.input({shape: [3, 4]});
  const y = new MultiHeadAttention({numHeads: 1, keyDim: 2, name: 'mha'}).apply(x);
  await tf.model({inputs: x, outputs: y as tf.SymbolicTensor}).save(fileSystem(dir));
  return dir;
}

const readJson = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
const writeJson = (dir: string, json: unknown) =>
  fs.writeFileSync(path.join(dir, 'model.json'), JSON.stringify(json));
const load = (dir: string) => tf.loadLayersModel(fileSystem(dir));

describe('loading', () => {
  beforeAll(() => tf.setBackend('cpu'));

  it('refuses weights links that lead out of the folder (file and folder links)', async () => {
    const dir = await savedModel();
    const outside = tmp();
    fs.copyFileSync(path.join(dir, 'weights.bin'), path.join(outside, 'weights.bin'));
    fs.rmSync(path.join(dir, 'weights.bin'));
    fs.symlinkSync(path.join(outside, 'weights.bin'), path.join(dir, 'weights.bin'));
    await expect(load(dir)).rejects.toThrow(/is a link to .*outside the model folder/);
    fs.rmSync(path.join(dir, 'weights.bin'));
    fs.symlinkSync(outside, path.join(dir, 'sub'));
    const json = readJson(dir);
    json.weightsManifest[0].paths = ['sub/weights.bin'];
    writeJson(dir, json);
    await expect(load(dir)).rejects.toThrow(/is a link to .*outside the model folder/);
    fs.rmSync(dir, {recursive: true});
    fs.rmSync(outside, {recursive: true});
  });

  it('allows links that stay inside the folder, and a real file named ..weights.bin', async () => {
    const dir = await savedModel();
    fs.renameSync(path.join(dir, 'weights.bin'), path.join(dir, '..weights.bin'));
    const json = readJson(dir);
    json.weightsManifest[0].paths = ['..weights.bin'];
    writeJson(dir, json);
    (await load(dir)).dispose();
    fs.symlinkSync(path.join(dir, '..weights.bin'), path.join(dir, 'link.bin'));
    json.weightsManifest[0].paths = ['link.bin'];
    writeJson(dir, json);
    (await load(dir)).dispose();
    fs.rmSync(dir, {recursive: true});
  });

  it('refuses a FIFO and a device without reading them (no hang, no 9 GB)', async () => {
    const dir = await savedModel();
    fs.rmSync(path.join(dir, 'weights.bin'));
    execFileSync('mkfifo', [path.join(dir, 'weights.bin')]);
    await expect(load(dir)).rejects.toThrow(/is not a regular file/);
    fs.rmSync(path.join(dir, 'weights.bin'));
    fs.symlinkSync('/dev/zero', path.join(dir, 'weights.bin'));
    await expect(load(dir)).rejects.toThrow(/outside the model folder|not a regular file/);
    fs.rmSync(dir, {recursive: true});
  }, 10000);

  it('checks the files against the manifest before reading: short, long, repeated', async () => {
    const dir = await savedModel();
    const file = path.join(dir, 'weights.bin');
    const data = fs.readFileSync(file);
    fs.writeFileSync(file, data.subarray(0, data.length - 4));
    await expect(load(dir)).rejects.toThrow(
      new RegExp(
        `declares ${data.length} bytes of weights, but its weights files hold ${data.length - 4}`,
      ),
    );
    fs.writeFileSync(file, Buffer.concat([data, Buffer.alloc(8)]));
    await expect(load(dir)).rejects.toThrow(/but its weights files hold/);
    fs.writeFileSync(file, data);
    const json = readJson(dir);
    json.weightsManifest[0].paths = Array(150).fill('weights.bin');
    writeJson(dir, json);
    await expect(load(dir)).rejects.toThrow(/lists the weights file weights.bin more than once/);
    fs.rmSync(dir, {recursive: true});
  });

  it('refuses a missing or malformed manifest unless only the topology is asked for', async () => {
    const dir = await savedModel();
    const json = readJson(dir);
    writeJson(dir, {...json, weightsManifest: undefined});
    await expect(load(dir)).rejects.toThrow(
      /has no weightsManifest, so the model would load with random weights/,
    );
    const model = await tf.loadLayersModel(fileSystem(dir, {topologyOnly: true}));
    expect(model.getLayer('mha')).toBeDefined();
    model.dispose();
    writeJson(dir, {...json, weightsManifest: {paths: ['weights.bin']}});
    await expect(load(dir)).rejects.toThrow(
      /expected weightsManifest to be a list of groups, received object/,
    );
    writeJson(dir, {...json, weightsManifest: [{paths: 'weights.bin', weights: []}]});
    await expect(load(dir)).rejects.toThrow(
      /expected the paths of weights group 0 to be a list of file names/,
    );
    fs.rmSync(dir, {recursive: true});
  });

  it('refuses a node naming a layer that does not exist, fast (tfjs would loop forever)', async () => {
    const dir = await savedModel();
    const json = readJson(dir);
    const mha = json.modelTopology.config.layers.find((l: {name: string}) => l.name === 'mha');
    mha.inbound_nodes[0][0][0] = 'nowhere';
    writeJson(dir, json);
    await expect(load(dir)).rejects.toThrow(
      /layer 'mha' of the model reads from 'nowhere', which is not a layer/,
    );
    await expect(
      convertKerasArtifacts({modelTopology: json.modelTopology, weightSpecs: []}),
    ).rejects.toThrow(/reads from 'nowhere'/);
    fs.rmSync(dir, {recursive: true});
  });

  it('refuses configs implying weights beyond the manifest before allocating them (num_heads 1e7, 1e9)', async () => {
    const dir = await savedModel();
    const json = readJson(dir);
    const mha = json.modelTopology.config.layers.find((l: {name: string}) => l.name === 'mha');
    for (const heads of [1e7, 1e9]) {
      mha.config.num_heads = heads;
      writeJson(dir, json);
      const memory = process.memoryUsage().rss;
      await expect(load(dir)).rejects.toThrow(
        new RegExp(
          `layer 'mha' \\(MultiHeadAttention\\) implies at least \\d+ weight values \\(num_heads = ${heads}\\)`,
        ),
      );
      // the work done, not the time taken (a busy machine is slow)
      expect(process.memoryUsage().rss - memory).toBeLessThan(200 * 2 ** 20);
    }
    fs.rmSync(dir, {recursive: true});
  });

  it('after an interrupted save (new weights, old JSON), loads the old model from .prev', async () => {
    const dir = await savedModel();
    const old = await load(dir);
    const oldWeights = old.getWeights().map((w) => w.arraySync());
    // simulate a kill between the two renames: weights replaced, JSON not yet
    const file = path.join(dir, 'weights.bin');
    fs.linkSync(file, `${file}.prev`);
    const other = Buffer.from(fs.readFileSync(file)).fill(1);
    fs.rmSync(file);
    fs.writeFileSync(file, other);
    const loaded = await load(dir);
    expect(loaded.getWeights().map((w) => w.arraySync())).toEqual(oldWeights);
    fs.rmSync(`${file}.prev`);
    await expect(load(dir)).rejects.toThrow(
      /do not match .*model.json \(checksum\), and no earlier weights/,
    );
    old.dispose();
    loaded.dispose();
    fs.rmSync(dir, {recursive: true});
  });
});

describe('errors at the boundaries', () => {
  beforeAll(() => tf.setBackend('cpu'));
  const fixture = (name: string) => path.join(__dirname, '..', 'fixtures', 'keras', name);

  it('a Keras file (.keras, .h5) says to load it with loadKerasModel', async () => {
    const dir = tmp();
    for (const name of ['model.keras', 'model.h5', 'MODEL.H5']) {
      const file = path.join(dir, name);
      fs.writeFileSync(file, 'PK'); // a real file: stat of <file>/model.json gave ENOTDIR
      await expect(load(file)).rejects.toThrow(
        `fileSystem: cannot load ${path.join(file, 'model.json')}: ${file} is a Keras file, not ` +
          `a folder converted for tfjs: load it with loadKerasModel(${JSON.stringify(file)}), ` +
          'which reads .keras and .h5 files directly',
      );
      // loadKerasModel reads Keras files itself: these 2 bytes are no zip archive, nor HDF5
      await expect(loadKerasModel(file)).rejects.toThrow(
        /to be a \.keras file \(a zip archive, starting with "PK"\) or a tf-keras 2 \.h5 model .* received 2 bytes starting with "PK"/,
      );
      const err = await load(file).catch((e: Error) => e);
      expect(String(err)).not.toMatch(/ENOTDIR/);
    }
    // a missing .keras path is named as missing, with the same advice
    await expect(load(path.join(dir, 'gone.keras'))).rejects.toThrow(
      /gone\.keras does not exist; .* load it with loadKerasModel\(".*gone\.keras"\)/,
    );
    // a folder named like a Keras file that holds a converted model still loads
    const named = path.join(dir, 'converted.keras');
    fs.cpSync(fixture('k2_mha_cross_key'), named, {recursive: true});
    (await loadKerasModel(named)).dispose();
    fs.rmSync(dir, {recursive: true});
  });

  it('a Keras 3 model folder or a keras-hub preset given to fileSystem names its loader', async () => {
    const keras3 = path.join(__dirname, '..', '..', 'fixtures', 'keras_files', 'sharded');
    await expect(load(keras3)).rejects.toThrow(
      `${keras3} is a Keras 3 model folder (config.json, no model.json), not a folder converted ` +
        `for tfjs: load it with loadKerasModel(${JSON.stringify(keras3)})`,
    );
    const preset = path.join(__dirname, '..', 'fixtures', 'hub_presets', 'gpt2');
    await expect(load(preset)).rejects.toThrow(
      `${preset} is a keras-hub preset (config.json, no model.json), not a folder converted for ` +
        `tfjs: load it with loadKerasHubPreset(${JSON.stringify(preset)}) (model, tokenizer and ` +
        `preprocessor) or loadKerasModel(${JSON.stringify(preset)}) (the model)`,
    );
  });

  it('a converted Keras model given to tf.loadLayersModel says to use loadKerasModel', async () => {
    for (const name of ['k2_mha_cross_key', 'k2_mha_attention_mask']) {
      await expect(load(fixture(name))).rejects.toThrow(
        /load a model converted from Keras with loadKerasModel from tfjs-attention/,
      );
      (await loadKerasModel(fixture(name))).dispose(); // which loads it
    }
  });
});

describe('paths that name nothing', () => {
  it('loadKerasModel of a missing .keras / .h5 file says the file is missing (not to convert it)', async () => {
    for (const name of ['missing.keras', 'missing.h5']) {
      const file = path.join(os.tmpdir(), 'keras-user-none', name);
      const err = (await loadKerasModel(file).catch((e: Error) => e)) as Error;
      expect(err.message).toMatch(
        new RegExp(`^loadKerasModel: cannot read ${file.replace(/[.\\/]/g, '\\$&')}: no such file`),
      );
      expect(err.message).not.toMatch(/tensorflowjs_converter|model\.json/);
    }
  });

  it('an empty path is refused by name, not read as the current folder', async () => {
    await expect(loadKerasModel('')).rejects.toThrow(
      /^loadKerasModel: expected a path, a URL, the bytes .* received an empty string$/,
    );
    await expect(loadKerasHubPreset('')).rejects.toThrow(
      /^loadKerasHubPreset: expected a preset folder path or URL, .* received an empty string$/,
    );
  });
});

describe('a folder that is no model', () => {
  it('loadKerasModel of a folder with neither config.json nor model.json names what it looked for', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-user-'));
    try {
      fs.writeFileSync(path.join(dir, 'notes.txt'), 'not a model');
      await expect(loadKerasModel(dir)).rejects.toThrow(
        new RegExp(
          `^loadKerasModel: expected the folder ${dir.replace(/[.\\/]/g, '\\$&')} to hold ` +
            'config.json \\(a Keras 3 model or keras-hub preset\\) or model.json \\(a converted ' +
            'model\\), received neither$',
        ),
      );
    } finally {
      fs.rmSync(dir, {recursive: true});
    }
  });
});
