/**
 * The Keras user paths tried as a new user (and a hostile one) would: loadKerasHubPreset,
 * loadKerasModel, generateText and saveKerasFile given broken, truncated or wrong inputs. Each
 * must refuse with an error saying what was expected and what arrived, not a TypeError, and
 * leave no tensor behind (tf.memory().numTensors before / after the rejected call).
 */
import {execFileSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  generateText,
  loadKerasHubPreset,
  loadKerasModel,
  loadTokenizer,
  saveKerasFile,
} from '../src';
import type {KerasHubPreset} from '../src';
import {zipEntries, zipEntryBytes} from '../src/io/zip_entries';
import {writeZip} from '../src/io/zip_writer';
import {parseFromKeras} from '../src/train/from_keras';
import {UsageError} from '../src/train/options';

const DIR = path.join(__dirname, 'fixtures', 'hub_presets');
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

/** Every file of a folder by its path inside it. */
function filesOf(dir: string, under = ''): Map<string, Uint8Array> {
  const out = new Map<string, Uint8Array>();
  for (const e of fs.readdirSync(path.join(dir, under), {withFileTypes: true})) {
    const rel = under === '' ? e.name : `${under}/${e.name}`;
    if (e.isDirectory()) for (const [k, v] of filesOf(dir, rel)) out.set(k, v);
    else out.set(rel, new Uint8Array(fs.readFileSync(path.join(dir, rel))));
  }
  return out;
}

/** The gpt2 preset's files with `name` replaced by `text`. */
function gpt2With(name: string, edit: (text: string) => string): Map<string, Uint8Array> {
  const files = filesOf(path.join(DIR, 'gpt2'));
  files.set(name, enc(edit(dec(files.get(name) as Uint8Array))));
  return files;
}

/** A JSON file's text with `config[key]` set to `value`. */
const withConfig = (key: string, value: unknown) => (text: string) => {
  const json = JSON.parse(text) as {config: Record<string, unknown>};
  json.config[key] = value;
  return JSON.stringify(json);
};

/** Expects `run` to reject with `message`, leaving as many tensors as before. */
async function rejectsWithoutLeak(run: () => Promise<unknown>, message: RegExp): Promise<void> {
  const before = tf.memory().numTensors;
  await expect(run()).rejects.toThrow(message);
  expect(tf.memory().numTensors).toBe(before);
}

beforeAll(() => tf.setBackend('cpu'));

describe('a preset that fails to load frees the model it had built', () => {
  it('tokenizer.json that is not JSON', async () => {
    await rejectsWithoutLeak(
      () => loadKerasHubPreset(gpt2With('tokenizer.json', () => '<html></html>')),
      /tokenizer\.json is not valid JSON/,
    );
  });

  it('preprocessor.json that is not JSON', async () => {
    await rejectsWithoutLeak(
      () => loadKerasHubPreset(gpt2With('preprocessor.json', () => '{')),
      /preprocessor\.json is not valid JSON/,
    );
  });

  it('preprocessor.json and tokenizer.json nesting 5,000 arrays: the depth is named', async () => {
    const deep = (text: string) =>
      text.replace('"config"', `"deep": ${'['.repeat(5000)}${']'.repeat(5000)}, "config"`);
    for (const name of ['preprocessor.json', 'tokenizer.json']) {
      await rejectsWithoutLeak(
        () => loadKerasHubPreset(gpt2With(name, deep)),
        new RegExp(
          `^loadKerasHubPreset: the files given/${name.replace('.', '\\.')} nests arrays / objects more than 256 deep`,
        ),
      );
    }
  });

  it("a preprocessor's sequence_length of -1", async () => {
    await rejectsWithoutLeak(
      () => loadKerasHubPreset(gpt2With('preprocessor.json', withConfig('sequence_length', -1))),
      /expected the preprocessor's sequence_length to be a whole number > 0, received -1/,
    );
  });

  it("a tokenizer's config_file leading out of the assets", async () => {
    await rejectsWithoutLeak(
      () => loadKerasHubPreset(gpt2With('tokenizer.json', withConfig('config_file', '../x.json'))),
      /expected the tokenizer's config_file to be a plain file name, received "\.\.\/x\.json"/,
    );
  });

  it('loadKerasModel on a preset folder whose tokenizer.json is not JSON', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-user-'));
    try {
      fs.cpSync(path.join(DIR, 'gpt2'), dir, {recursive: true});
      fs.writeFileSync(path.join(dir, 'tokenizer.json'), '<html></html>');
      await rejectsWithoutLeak(() => loadKerasModel(dir), /tokenizer\.json is not valid JSON/);
    } finally {
      fs.rmSync(dir, {recursive: true});
    }
  });

  it('the same preset, repaired, loads and frees all it made', async () => {
    const before = tf.memory().numTensors;
    const preset: KerasHubPreset = await loadKerasHubPreset(filesOf(path.join(DIR, 'gpt2')));
    expect(preset.preprocessor?.sequenceLength).toBeGreaterThan(0);
    preset.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('generateText refuses a maxLength the model cannot take before allocating rows', () => {
  let gpt2: KerasHubPreset;
  let llama3: KerasHubPreset;
  beforeAll(async () => {
    gpt2 = await loadKerasHubPreset(path.join(DIR, 'gpt2'));
    llama3 = await loadKerasHubPreset(path.join(DIR, 'llama3'));
  });
  afterAll(() => {
    for (const p of [gpt2, llama3]) p.dispose();
  });

  it("GPT-2: a maxLength past its position embedding names the model's limit", async () => {
    // padding 1e9 ids per row first ran the process out of memory (a crash, not an error)
    await rejectsWithoutLeak(
      () => generateText(gpt2, 'The quick', {maxLength: 1e9}),
      /maxLength 1000000000 exceeds the model's position limit \d+ .*expected maxLength in \[1, \d+\]/,
    );
  });

  it('Llama 3 (rotary positions, no limit): the memory estimate refuses it', async () => {
    await rejectsWithoutLeak(
      () => generateText(llama3, ['a', 'b'], {maxLength: 1e9}),
      /maxLength 1000000000 for 2 prompts needs about .* over memoryLimit 2\.00 GiB/,
    );
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

describe('a folder that is no model, and the CLI given no file', () => {
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

  it('--from-keras with an empty value is a usage error', () => {
    for (const argv of [['--from-keras='], ['--from-keras=', '--out', 'models']]) {
      expect(() => parseFromKeras(argv)).toThrow(UsageError);
      expect(() => parseFromKeras(argv)).toThrow(/^--from-keras needs a value$/);
    }
  });
});

/** A layer of the user's own, registered with tfjs: Keras has no class of that name. */
class DoubleIt extends tf.layers.Layer {
  static className = 'DoubleIt';
  override call(x: tf.Tensor | tf.Tensor[]): tf.Tensor {
    return tf.tidy(() => tf.mul(Array.isArray(x) ? x[0] : x, 2));
  }
}
tf.serialization.registerClass(DoubleIt);

describe('saveKerasFile refuses what Keras could not load back', () => {
  it('a layer Keras has no class for, by its name and class', async () => {
    const input = tf.input({shape: [3]});
    const dense = tf.layers.dense({units: 2, name: 'dense_in'}).apply(input) as tf.SymbolicTensor;
    const out = new DoubleIt({name: 'double_it'}).apply(dense) as tf.SymbolicTensor;
    const model = tf.model({inputs: input, outputs: out});
    const before = tf.memory().numTensors;
    await expect(saveKerasFile(model)).rejects.toThrow(
      /^saveKerasFile: layer 'double_it' is a DoubleIt, which Keras has no class for \(expected tfjs' built-in layers or this package's\)/,
    );
    expect(tf.memory().numTensors).toBe(before);
    model.dispose();
  });

  it("tfjs' layers whose class Keras 3 removed (ThresholdedReLU, RandomWidth)", async () => {
    for (const [layer, cls] of [
      [tf.layers.thresholdedReLU({theta: 0.5, name: 'gone'}), 'ThresholdedReLU'],
      [tf.layers.randomWidth({factor: 0.1, name: 'gone'}), 'RandomWidth'],
    ] as Array<[tf.layers.Layer, string]>) {
      const input = tf.input({shape: [4, 4, 1]});
      const model = tf.model({inputs: input, outputs: layer.apply(input) as tf.SymbolicTensor});
      await expect(saveKerasFile(model)).rejects.toThrow(
        new RegExp(`^saveKerasFile: layer 'gone' is a ${cls}, which Keras has no class for`),
      );
      model.dispose();
    }
  });

  it('something other than a model, by what it received', async () => {
    const save = saveKerasFile as unknown as (m: unknown) => Promise<Uint8Array>;
    await expect(save(null)).rejects.toThrow(
      /^saveKerasFile: expected a tf.LayersModel .*received null$/,
    );
    await expect(save({})).rejects.toThrow(
      /^saveKerasFile: expected a tf.LayersModel .*received object$/,
    );
  });
});

describe('saveKerasFile to a path that cannot hold the file', () => {
  const input = tf.input({shape: [3]});
  const model = tf.model({
    inputs: input,
    outputs: tf.layers.dense({units: 2}).apply(input) as tf.SymbolicTensor,
  });
  afterAll(() => model.dispose());

  it('a folder: refused by name, nothing written beside it', async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-user-'));
    const dir = path.join(parent, 'out');
    fs.mkdirSync(dir);
    try {
      await expect(saveKerasFile(model, dir)).rejects.toThrow(
        new RegExp(
          `^saveKerasFile: expected a file path, received the folder ${dir.replace(/[.\\/]/g, '\\$&')}$`,
        ),
      );
      expect(fs.readdirSync(parent)).toEqual(['out']);
      expect(fs.readdirSync(dir)).toEqual([]);
    } finally {
      fs.rmSync(parent, {recursive: true});
    }
  });

  it('a FIFO or a device: refused, never replaced (a rename over /dev/full replaced it)', async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-user-'));
    const fifo = path.join(parent, 'pipe.keras');
    execFileSync('mkfifo', [fifo]);
    try {
      await expect(saveKerasFile(model, fifo)).rejects.toThrow(
        `saveKerasFile: expected a path of a regular file, received ${fifo}, a FIFO`,
      );
      expect(fs.lstatSync(fifo).isFIFO()).toBe(true);
      expect(fs.readdirSync(parent)).toEqual(['pipe.keras']);
      // a device, by a link named .keras (the check is on what the path resolves to)
      const dev = path.join(parent, 'dev.keras');
      fs.symlinkSync('/dev/null', dev);
      await expect(saveKerasFile(model, dev)).rejects.toThrow(
        `saveKerasFile: expected a path of a regular file, received ${dev}, a device`,
      );
      expect(fs.lstatSync('/dev/null').isCharacterDevice()).toBe(true);
    } finally {
      fs.rmSync(parent, {recursive: true});
    }
  });

  it("a symlink: written through to its target, as Keras' model.save writes; a dangling one refused", async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-user-'));
    try {
      const target = path.join(parent, 'real.keras');
      fs.writeFileSync(target, 'old');
      const link = path.join(parent, 'link.keras');
      fs.symlinkSync(target, link);
      const bytes = await saveKerasFile(model, link);
      expect(fs.lstatSync(link).isSymbolicLink()).toBe(true);
      expect(Buffer.from(bytes).equals(fs.readFileSync(target))).toBe(true);
      const dangling = path.join(parent, 'gone.keras');
      fs.symlinkSync(path.join(parent, 'missing.keras'), dangling);
      await expect(saveKerasFile(model, dangling)).rejects.toThrow(
        `saveKerasFile: cannot write ${dangling}: it is a symlink to a path that does not exist`,
      );
      expect(fs.readdirSync(parent).sort()).toEqual(['gone.keras', 'link.keras', 'real.keras']);
    } finally {
      fs.rmSync(parent, {recursive: true});
    }
  });

  it('a name not ending in .keras, which keras.saving.load_model refuses', async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-user-'));
    try {
      const file = path.join(parent, 'x.zip');
      await expect(saveKerasFile(model, file)).rejects.toThrow(
        `saveKerasFile: expected a path ending in .keras (keras.saving.load_model reads no other name), received ${file}`,
      );
      expect(fs.readdirSync(parent)).toEqual([]);
    } finally {
      fs.rmSync(parent, {recursive: true});
    }
  });

  it('a file in a folder that does not exist', async () => {
    const file = path.join(os.tmpdir(), 'keras-user-no-such-folder', 'm.keras');
    await expect(saveKerasFile(model, file)).rejects.toThrow(
      /^saveKerasFile: cannot write .*m\.keras: the folder .*keras-user-no-such-folder does not exist$/,
    );
  });
});

describe('a preset over http fetches nothing outside its base URL', () => {
  const base = 'https://example.com/presets/gpt2/';
  const FOREIGN = 'FOREIGN-SECRET-BYTES';

  /** The gpt2 preset served at `base`, its weights as shards named `shard`; every URL asked. */
  function serve(shard: string) {
    const files = filesOf(path.join(DIR, 'gpt2'));
    files.delete('model.weights.h5');
    files.set('model.weights.json', enc(JSON.stringify({weight_map: {'layers/x': [shard]}})));
    const asked: string[] = [];
    const fetch = async (url: string) => {
      asked.push(url);
      const bytes = url.startsWith(base) ? files.get(url.slice(base.length)) : enc(FOREIGN);
      return bytes == null ? new Response(null, {status: 404}) : new Response(bytes as BodyInit);
    };
    return {asked, fetch};
  }

  for (const shard of ['http:attacker.example', '%2e%2e', 'https://attacker.example/x.h5']) {
    it(`a shard named ${JSON.stringify(shard)} is refused before it is fetched`, async () => {
      const {asked, fetch} = serve(shard);
      const err = await loadKerasHubPreset(base, {fetch}).catch((e: Error) => e);
      expect(String(err)).toMatch(
        new RegExp(
          `^Error: load\\w+: ${base.replace(/[./]/g, '\\$&')}model\\.weights\\.json ` +
            `names the shard ${JSON.stringify(shard).replace(/[./]/g, '\\$&')}; expected a file ` +
            'name beside it',
        ),
      );
      // nothing outside the preset was asked for; nothing of a foreign answer is in the message
      expect(asked.filter((u) => !u.startsWith(base))).toEqual([]);
      expect(String(err)).not.toMatch(/FOREIGN|46 4f 52/);
    });
  }
});

describe("loadKerasHubPreset's options and fetch, when they misbehave", () => {
  const load = loadKerasHubPreset as unknown as (s: unknown, o?: unknown) => Promise<unknown>;
  const url = 'https://example.com/gpt2/';

  it('a fetch that answers something other than a Response', async () => {
    await expect(load(url, {fetch: async () => null})).rejects.toThrow(
      /^loadKerasHubPreset: fetching https:\/\/example\.com\/gpt2\/config\.json: expected a Response, received null$/,
    );
  });

  it('a fetch that rejects with a string keeps the reason', async () => {
    await expect(
      load(url, {
        fetch: () => Promise.reject('offline'),
      }),
    ).rejects.toThrow(
      /^loadKerasHubPreset: cannot fetch https:\/\/example\.com\/gpt2\/config\.json: offline$/,
    );
  });

  it('options that are not an object, or hold no functions', async () => {
    const folder = path.join(DIR, 'gpt2');
    await expect(load(folder, null)).rejects.toThrow(
      /^loadKerasHubPreset: expected options to be an object .*received null$/,
    );
    await expect(load(folder, {fetch: 5})).rejects.toThrow(
      /^loadKerasHubPreset: expected options\.fetch to be a function, received number$/,
    );
    await expect(load(folder, {onProgress: 'yes'})).rejects.toThrow(
      /^loadKerasHubPreset: expected options\.onProgress to be a function, received string$/,
    );
  });
});

describe('loadTokenizer given what is not a tokenizer folder', () => {
  const load = loadTokenizer as unknown as (s: unknown, o?: unknown) => Promise<unknown>;
  const gpt2 = path.join(__dirname, '..', 'fixtures', 'tokenizers', 'gpt2');

  it('an empty path, null or undefined: refused, not read as "/", "null" or "undefined"', async () => {
    for (const [source, shown] of [
      ['', '""'],
      [null, 'null'],
      [undefined, 'undefined'],
    ] as const) {
      await expect(load(source)).rejects.toThrow(
        `loadTokenizer: source must be a folder path or an http(s) URL, received ${shown}.`,
      );
    }
  });

  it('options null, and a fetch that answers no Response or rejects with a string', async () => {
    await expect(load(gpt2, null)).rejects.toThrow(
      /^loadTokenizer: expected options to be an object .*received null\.$/,
    );
    await expect(load('https://example.com/t/', {fetch: async () => null})).rejects.toThrow(
      /^loadTokenizer: fetching https:\/\/example\.com\/t\/tokenizer\.json: expected a Response, received null\.$/,
    );
    await expect(
      load('https://example.com/t/', {fetch: () => Promise.reject('offline')}),
    ).rejects.toThrow(
      /^loadTokenizer: cannot fetch https:\/\/example\.com\/t\/tokenizer\.json: offline\.$/,
    );
  });

  it('an asset that is a link leading out of the folder is refused', async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-user-'));
    const dir = path.join(parent, 'gpt2');
    try {
      fs.cpSync(gpt2, dir, {recursive: true});
      const outside = path.join(parent, 'elsewhere.json');
      fs.renameSync(path.join(dir, 'assets/tokenizer/vocabulary.json'), outside);
      fs.symlinkSync(outside, path.join(dir, 'assets/tokenizer/vocabulary.json'));
      await expect(load(dir)).rejects.toThrow(
        /^loadTokenizer: refusing assets\/tokenizer\/vocabulary\.json: it leads to .*elsewhere\.json, outside the folder /,
      );
      // a link that stays inside the folder is fine
      fs.rmSync(path.join(dir, 'assets/tokenizer/vocabulary.json'));
      fs.renameSync(outside, path.join(dir, 'vocab_inside.json'));
      fs.symlinkSync('../../vocab_inside.json', path.join(dir, 'assets/tokenizer/vocabulary.json'));
      await expect(load(dir)).resolves.toBeDefined();
    } finally {
      fs.rmSync(parent, {recursive: true});
    }
  });
});

describe('loadKerasModel names itself in the errors of the keras-hub route', () => {
  /** A .keras file's bytes with config.json edited. */
  async function withConfig(file: string, edit: (text: string) => string): Promise<Uint8Array> {
    const bytes = new Uint8Array(fs.readFileSync(file));
    const out = [];
    for (const [name, entry] of zipEntries(bytes, 'a fixture')) {
      const data = await zipEntryBytes(bytes, entry, bytes.length * 100);
      out.push({name, data: name === 'config.json' ? enc(edit(dec(data))) : data});
    }
    return writeZip(out);
  }

  it('a plain .keras whose config.json is not JSON', async () => {
    const bytes = await withConfig(
      path.join(__dirname, '..', 'fixtures', 'keras_files', 'functional.keras'),
      () => '<html></html>',
    );
    await rejectsWithoutLeak(
      () => loadKerasModel(bytes),
      /^loadKerasModel: the bytes given\/config\.json is not valid JSON/,
    );
  });

  it('a plain .keras with a layer class neither tfjs nor the package has: what to register', async () => {
    const file = path.join(__dirname, '..', 'fixtures', 'keras_files', 'functional.keras');
    const bytes = await withConfig(file, (text) => {
      const edited = text.replace('"class_name": "Dense"', '"class_name": "WeirdDense"');
      if (edited === text) throw new Error('the fixture has no Dense layer to rename');
      return edited;
    });
    await rejectsWithoutLeak(
      () => loadKerasModel(bytes),
      /^loadKerasModel: the model has a layer of class 'WeirdDense', which neither tfjs nor tfjs-attention provides \(a custom layer\): write it in JavaScript as a tf\.layers\.Layer subclass whose static className is 'WeirdDense', register it with tf\.serialization\.registerClass/,
    );
  });

  it('a keras-hub .keras of a class not implemented', async () => {
    const bytes = await withConfig(path.join(DIR, 'gpt2.keras'), (text) =>
      text.replace('"GPT2CausalLM"', '"GemmaCausalLM"'),
    );
    await rejectsWithoutLeak(
      () => loadKerasModel(bytes),
      /^loadKerasModel: the bytes given\/config\.json holds the class "GemmaCausalLM", which is not implemented \(expected one of /,
    );
  });
});

describe("a preset's tokenizer asset that does not parse", () => {
  it('is named with its place in the preset, by the function called', async () => {
    await rejectsWithoutLeak(
      () => loadKerasHubPreset(gpt2With('assets/tokenizer/vocabulary.json', () => 'x')),
      /^loadKerasHubPreset: the files given\/assets\/tokenizer: vocabulary\.json is not valid JSON/,
    );
  });
});
