/**
 * keras-hub presets read in JavaScript (loadKerasHubPreset, and loadKerasModel on keras-hub
 * folders and .keras files) against keras-hub 0.32 itself: the committed presets and .keras files
 * of fixtures/hub_presets.py (tiny random GPT2CausalLM, Llama3CausalLM, BertTextClassifier saved
 * by keras-hub's save_to_preset and .save) and keras-hub's outputs recorded there: greedy
 * generate() strings (compared exactly) and logits (within 1e-4, the issue's tolerance).
 */
import * as fs from 'fs';
import * as http from 'http';
import type {AddressInfo} from 'net';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import {generateText, loadKerasHubPreset, loadKerasModel, loadTokenizer, quantize} from '../../src';
import type {KerasHubPreset} from '../../src';
import {zipEntries, zipEntryBytes} from '../../src/io/zip_entries';
import {writeZip} from '../../src/io/zip_writer';

const DIR = path.join(__dirname, '..', 'fixtures', 'hub_presets');
const TOL = 1e-4;
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

interface Expected {
  prompts?: string[];
  generate?: Record<string, string[]>;
  generate_one?: string;
  texts?: string[];
  token_ids: number[][];
  segment_ids?: number[][];
  padding_mask: number[][];
  logits: number[][] | number[][][];
  pooled_output?: number[][];
}

const expected = (name: string): Expected =>
  JSON.parse(fs.readFileSync(path.join(DIR, `${name}.expected.json`), 'utf8')) as Expected;

/** Every file of a folder by its path inside it. */
function filesOf(dir: string, under = ''): Map<string, Uint8Array<ArrayBuffer>> {
  const out = new Map<string, Uint8Array<ArrayBuffer>>();
  for (const e of fs.readdirSync(path.join(dir, under), {withFileTypes: true})) {
    const rel = under === '' ? e.name : `${under}/${e.name}`;
    if (e.isDirectory()) for (const [k, v] of filesOf(dir, rel)) out.set(k, v);
    else
      out.set(rel, new Uint8Array(fs.readFileSync(path.join(dir, rel))) as Uint8Array<ArrayBuffer>);
  }
  return out;
}

function maxDiff(a: number[] | number[][] | number[][][], b: number[] | number[][] | number[][][]) {
  const x = (a as number[]).flat(3) as number[];
  const y = (b as number[]).flat(3) as number[];
  expect(x.length).toBe(y.length);
  return x.reduce((m, v, i) => Math.max(m, Math.abs(v - y[i])), 0);
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

function dispose(p: KerasHubPreset) {
  p.dispose();
}

async function causalLogits(model: tf.LayersModel, e: Expected): Promise<number[][][]> {
  const ids = tf.tensor2d(e.token_ids, undefined, 'int32');
  const mask = tf.tensor2d(e.padding_mask, undefined, 'int32');
  const out = model.predict([ids, mask]) as tf.Tensor;
  const values = (await out.array()) as number[][][];
  tf.dispose([ids, mask, out]);
  return values;
}

async function bertOutputs(model: tf.LayersModel, e: Expected): Promise<number[][][]> {
  const inputs = [e.token_ids, e.segment_ids as number[][], e.padding_mask].map((a) =>
    tf.tensor2d(a, undefined, 'int32'),
  );
  const out = model.predict(inputs);
  const list = Array.isArray(out) ? out : [out];
  const values = (await Promise.all(list.map((t) => t.array()))) as number[][][];
  tf.dispose([...inputs, ...list]);
  return values;
}

describe.each(['cpu', 'wasm'])('keras-hub presets on %s', (backend) => {
  beforeAll(async () => {
    await tf.setBackend(backend);
    await tf.ready();
  });

  describe.each(['gpt2', 'llama3'])('%s causal LM', (name) => {
    const e = expected(name);
    it('from the preset folder: greedy generateText equals keras-hub generate, logits within 1e-4', async () => {
      const before = tf.memory().numTensors;
      const preset = await loadKerasHubPreset(path.join(DIR, name));
      expect(preset.preprocessor).toEqual({
        sequenceLength: 16,
        addStartToken: true,
        addEndToken: true,
      });
      expect(preset.tokenizer).not.toBeNull();
      expect((e.prompts as string[]).map((p) => preset.tokenizer?.encode(p))).toEqual(
        (e as unknown as {prompt_ids: number[][]}).prompt_ids,
      );
      const gen = {
        model: preset.model,
        tokenizer: preset.tokenizer,
        preprocessor: preset.preprocessor,
      };
      for (const [maxLength, strings] of Object.entries(e.generate as Record<string, string[]>)) {
        expect(
          await generateText(gen, e.prompts as string[], {maxLength: Number(maxLength)}),
        ).toEqual(strings);
      }
      expect(await generateText(gen, (e.prompts as string[])[0], {maxLength: 12})).toEqual([
        e.generate_one,
      ]);
      expect(maxDiff(await causalLogits(preset.model, e), e.logits)).toBeLessThan(TOL);
      // the backbone shares the task's layers: its output feeds the logits
      expect(preset.backbone.outputs[0].shape).toEqual([null, null, 16]);
      dispose(preset);
      expect(tf.memory().numTensors).toBe(before);
    });
  });

  describe('bert text classifier', () => {
    const e = expected('bert');
    it('from the preset folder (task.weights.h5): logits and pooled output within 1e-4', async () => {
      const before = tf.memory().numTensors;
      const preset = await loadKerasHubPreset(path.join(DIR, 'bert'));
      expect(preset.preprocessor).toEqual({
        sequenceLength: 12,
        addStartToken: true,
        addEndToken: true,
      });
      // the packed ids keras-hub's preprocessor fed: [CLS] ids [SEP] then padding
      const tok = preset.tokenizer!;
      (e.texts as string[]).forEach((t, i) => {
        const ids = [tok.startTokenId!, ...tok.encode(t), tok.endTokenId!];
        expect(e.token_ids[i].slice(0, ids.length)).toEqual(ids);
      });
      const [logits] = await bertOutputs(preset.model, e);
      expect(maxDiff(logits, e.logits)).toBeLessThan(TOL);
      const [, pooled] = await bertOutputs(preset.backbone, e);
      expect(maxDiff(pooled, e.pooled_output as number[][])).toBeLessThan(TOL);
      // disposing the task leaves the backbone working, then both free everything
      preset.model.dispose();
      const [, again] = await bertOutputs(preset.backbone, e);
      expect(maxDiff(again, e.pooled_output as number[][])).toBeLessThan(TOL);
      preset.backbone.dispose();
      expect(tf.memory().numTensors).toBe(before);
    });
  });
});

// the routes of the files are the same code on every backend: they run on cpu
describe.each(['cpu', 'wasm'])(
  "loadKerasHubPreset(float preset, {quantize: 'int8' | 'int4'}) on %s",
  (backend) => {
    beforeAll(async () => {
      await tf.setBackend(backend);
      await tf.ready();
    });

    it.each([
      ['gpt2', 'int8'],
      ['llama3', 'int8'],
      ['gpt2', 'int4'],
      ['llama3', 'int4'],
    ] as const)(
      '%s: quantized to %s while loading, the model quantize(model, mode) makes of the float one, with no float copy of a quantized weight',
      async (name, mode) => {
        const float = await loadKerasHubPreset(path.join(DIR, name));
        const reference = quantize(float.model, mode);
        const before = tf.memory().numTensors;
        // every variable made while loading: its dtype and size
        const engine = tf.engine() as unknown as {
          makeVariable: (v: tf.Tensor, ...rest: unknown[]) => tf.Variable;
        };
        const make = engine.makeVariable;
        const made: Array<[string, number]> = [];
        engine.makeVariable = function (v: tf.Tensor, ...rest: unknown[]) {
          made.push([v.dtype, v.size]);
          return make.call(this, v, ...rest);
        };
        let int8: KerasHubPreset;
        try {
          int8 = await loadKerasHubPreset(path.join(DIR, name), {quantize: mode});
        } finally {
          engine.makeVariable = make;
        }
        // the same weights, byte for byte (int8 values, scales, the float ones), by name
        const byName = (m: tf.LayersModel) => new Map(m.weights.map((w) => [w.originalName, w]));
        const want = byName(reference);
        const got = byName(int8.model);
        expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
        let int8Values = 0;
        for (const [n, w] of got) {
          const t = w.read();
          const r = (want.get(n) as tf.LayerVariable).read();
          expect([n, t.dtype, t.shape]).toEqual([n, r.dtype, r.shape]);
          if (t.dtype === 'bool') int8Values += t.size;
          expect([n, Array.from(t.dataSync()).every((v, i) => v === r.dataSync()[i])]).toEqual([
            n,
            true,
          ]);
        }
        expect(int8Values).toBeGreaterThan(0);
        // no float variable of an int8 weight's size was made: the float32 variables made are the
        // model's float32 weights (norms, biases, scales, positions), once each
        const floatMade = made.filter(([d]) => d === 'float32').reduce((a, [, n]) => a + n, 0);
        const floatHeld = int8.model.weights
          .filter((w) => w.dtype === 'float32')
          .reduce((a, w) => a + w.read().size, 0);
        expect(floatMade).toBe(floatHeld);
        const ids = tf.tensor2d([[1, 2, 3, 4, 5]], [1, 5], 'int32');
        const mask = tf.onesLike(ids);
        const [a, b] = [int8.model, reference].map((m) => {
          const y = m.predict([ids, mask]) as tf.Tensor;
          const values = Array.from(y.dataSync());
          y.dispose();
          return values;
        });
        expect(a).toEqual(b);
        tf.dispose([ids, mask]);
        int8.dispose();
        expect(tf.memory().numTensors).toBe(before);
        reference.dispose();
        float.dispose();
      },
    );

    it('refuses a preset quantized already (int8, int4) and a mode it does not implement', async () => {
      const int8Preset = path.join(__dirname, '..', 'fixtures', 'int8_files', 'gpt2_preset');
      await expect(loadKerasHubPreset(int8Preset, {quantize: 'int8'})).rejects.toThrow(
        /loadKerasHubPreset: GPT2CausalLM: the weight layers\/gpt2_backbone\/.*vars\/0 is int8 already; expected a float32 preset to quantize/,
      );
      await expect(
        loadKerasHubPreset(path.join(DIR, 'gpt2'), {quantize: 'int2'} as never),
      ).rejects.toThrow(
        "loadKerasHubPreset: expected options.quantize to be 'int8' or 'int4' (or left out), received \"int2\"",
      );
      const int4Preset = path.join(__dirname, '..', 'fixtures', 'int4_files', 'gpt2_block128');
      await expect(loadKerasHubPreset(int4Preset, {quantize: 'int4'})).rejects.toThrow(
        'the preset is int4 already; expected a float32 preset to quantize',
      );
    });
  },
);

describe('keras-hub .keras files and loadKerasModel', () => {
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  describe.each(['gpt2', 'llama3'])('%s causal LM', (name) => {
    const e = expected(name);
    it('from the .keras task file (path and bytes) and loadKerasModel', async () => {
      const before = tf.memory().numTensors;
      const file = path.join(DIR, `${name}.keras`);
      const fromPath = await loadKerasHubPreset(file);
      expect(fromPath.preprocessor?.sequenceLength).toBe(16);
      const gen = {
        model: fromPath.model,
        tokenizer: fromPath.tokenizer,
        preprocessor: fromPath.preprocessor,
      };
      expect(await generateText(gen, e.prompts as string[], {maxLength: 16})).toEqual(
        (e.generate as Record<string, string[]>)['16'],
      );
      dispose(fromPath);
      const fromBytes = await loadKerasHubPreset(new Uint8Array(fs.readFileSync(file)));
      expect(maxDiff(await causalLogits(fromBytes.model, e), e.logits)).toBeLessThan(TOL);
      dispose(fromBytes);
      for (const source of [file, path.join(DIR, name)]) {
        const model = await loadKerasModel(source);
        expect(maxDiff(await causalLogits(model, e), e.logits)).toBeLessThan(TOL);
        model.dispose();
      }
      expect(tf.memory().numTensors).toBe(before);
    });
  });

  describe('bert text classifier', () => {
    const e = expected('bert');
    it('from the .keras files: task and backbone', async () => {
      const before = tf.memory().numTensors;
      const task = await loadKerasModel(path.join(DIR, 'bert.keras'));
      expect(maxDiff((await bertOutputs(task, e))[0], e.logits)).toBeLessThan(TOL);
      task.dispose();
      const backbone = await loadKerasHubPreset(path.join(DIR, 'bert_backbone.keras'));
      expect(backbone.model).toBe(backbone.backbone);
      expect(backbone.tokenizer).toBeNull();
      const [, pooled] = await bertOutputs(backbone.model, e);
      expect(maxDiff(pooled, e.pooled_output as number[][])).toBeLessThan(TOL);
      dispose(backbone);
      expect(tf.memory().numTensors).toBe(before);
    });
  });
});

describe('disposing a preset', () => {
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  it.each(['gpt2', 'bert'])(
    '%s: model.dispose() alone frees every tensor when backbone was never read',
    async (name) => {
      const before = tf.memory().numTensors;
      const preset = await loadKerasHubPreset(path.join(DIR, name));
      expect(tf.memory().numTensors).toBeGreaterThan(before);
      preset.model.dispose();
      expect(tf.memory().numTensors).toBe(before);
      // the backbone cannot be read any more, and says why
      expect(() => preset.backbone).toThrow(
        "loadKerasHubPreset: the preset's backbone was read after its model was disposed",
      );
      preset.dispose(); // nothing left to free: no error
      expect(tf.memory().numTensors).toBe(before);
    },
  );

  it('preset.dispose() frees the model and the backbone it made, read or not', async () => {
    const before = tf.memory().numTensors;
    const read = await loadKerasHubPreset(path.join(DIR, 'gpt2'));
    const backbone = read.backbone;
    expect(read.backbone).toBe(backbone); // made once
    read.dispose();
    expect(tf.memory().numTensors).toBe(before);
    read.dispose();
    const unread = await loadKerasHubPreset(path.join(DIR, 'llama3'));
    unread.dispose();
    expect(tf.memory().numTensors).toBe(before);
    // a backbone saved alone: model and backbone are one model
    const alone = await loadKerasHubPreset(path.join(DIR, 'gpt2_backbone.keras'));
    expect(alone.backbone).toBe(alone.model);
    alone.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('a backbone that was read keeps working after model.dispose(), until it is disposed', async () => {
    const e = expected('gpt2');
    const before = tf.memory().numTensors;
    const preset = await loadKerasHubPreset(path.join(DIR, 'gpt2'));
    const {backbone} = preset;
    preset.model.dispose();
    expect(tf.memory().numTensors).toBeGreaterThan(before);
    const ids = tf.tensor2d(e.token_ids, undefined, 'int32');
    const mask = tf.tensor2d(e.padding_mask, undefined, 'int32');
    const out = backbone.predict([ids, mask]) as tf.Tensor;
    expect(out.shape).toEqual([e.token_ids.length, e.token_ids[0].length, 16]);
    tf.dispose([ids, mask, out]);
    backbone.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('keras-hub preset sources', () => {
  const e = expected('gpt2');
  const greedy16 = (e.generate as Record<string, string[]>)['16'];
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  /** Greedy strings equal keras-hub's, and every tensor freed after disposing. */
  async function generates(load: Promise<KerasHubPreset>) {
    const before = tf.memory().numTensors;
    const preset = await load;
    const gen = {
      model: preset.model,
      tokenizer: preset.tokenizer,
      preprocessor: preset.preprocessor,
    };
    expect(await generateText(gen, e.prompts as string[], {maxLength: 8})).toEqual(
      (e.generate as Record<string, string[]>)['8'],
    );
    dispose(preset);
    expect(tf.memory().numTensors).toBe(before);
  }

  it('a Map of path -> bytes, and File[] of a dropped folder (webkitRelativePath)', async () => {
    const files = filesOf(path.join(DIR, 'gpt2'));
    await generates(loadKerasHubPreset(files));
    const dropped = [...files].map(([p, bytes]) => {
      const f = new File([bytes], p.split('/').pop() as string);
      Object.defineProperty(f, 'webkitRelativePath', {value: `gpt2/${p}`});
      return f;
    });
    await generates(loadKerasHubPreset(dropped));
    // a Map of Blobs and ArrayBuffers works as well
    const mixed = new Map<string, Blob | ArrayBuffer>();
    for (const [p, b] of files) mixed.set(p, p.endsWith('.h5') ? new Blob([b]) : b.slice().buffer);
    await generates(loadKerasHubPreset(mixed));
  });

  describe('over http', () => {
    let server: http.Server;
    let base: string;
    const served: string[] = [];
    beforeAll(async () => {
      server = http.createServer((req, res) => {
        const rel = decodeURIComponent((req.url ?? '/').slice(1));
        served.push(rel);
        const file = path.join(DIR, rel);
        if (!file.startsWith(DIR) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
          res.writeHead(404).end();
          return;
        }
        const bytes = fs.readFileSync(file);
        res.writeHead(200, {'content-length': bytes.length}).end(bytes);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it('a preset folder URL reads only the files it names, with progress', async () => {
      served.length = 0;
      const progress: number[] = [];
      const preset = await loadKerasHubPreset(`${base}/gpt2/`, {
        onProgress: (f) => progress.push(f),
      });
      expect(new Set(served)).toEqual(
        new Set([
          'gpt2/config.json',
          'gpt2/task.json',
          'gpt2/model.weights.h5',
          'gpt2/task.weights.h5',
          'gpt2/task.weights.json',
          'gpt2/tokenizer.json',
          'gpt2/preprocessor.json',
          'gpt2/assets/tokenizer/vocabulary.json',
          'gpt2/assets/tokenizer/merges.txt',
        ]),
      );
      expect(progress[0]).toBe(0);
      expect(progress[progress.length - 1]).toBe(1);
      expect(progress.every((f, i) => i === 0 || f >= progress[i - 1])).toBe(true);
      const gen = {
        model: preset.model,
        tokenizer: preset.tokenizer,
        preprocessor: preset.preprocessor,
      };
      expect(await generateText(gen, e.prompts as string[], {maxLength: 16})).toEqual(greedy16);
      dispose(preset);
    });

    it('a .keras task file URL', async () => {
      await generates(loadKerasHubPreset(`${base}/gpt2.keras`));
    });
  });
});

describe('hostile presets', () => {
  const files = () => filesOf(path.join(DIR, 'gpt2'));
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  it('a missing tokenizer asset names the file', async () => {
    const m = files();
    m.delete('assets/tokenizer/merges.txt');
    const before = tf.memory().numTensors;
    await expect(loadKerasHubPreset(m)).rejects.toThrow(
      'GPT2Tokenizer needs the asset assets/tokenizer/merges.txt, which is missing',
    );
    expect(tf.memory().numTensors).toBe(before);
  });

  it('a missing weights file names itself', async () => {
    const m = files();
    m.delete('model.weights.h5');
    await expect(loadKerasHubPreset(m)).rejects.toThrow(
      'to hold model.weights.h5 or model.weights.json',
    );
  });

  it('an unknown config class lists the known ones', async () => {
    const m = files();
    const config = JSON.parse(new TextDecoder().decode(m.get('config.json')));
    config.class_name = 'GemmaBackbone';
    m.set('config.json', new TextEncoder().encode(JSON.stringify(config)));
    await expect(loadKerasHubPreset(m)).rejects.toThrow(
      'holds the class "GemmaBackbone", which is not implemented (expected one of GPT2Backbone, ' +
        'GPT2CausalLM',
    );
  });

  it('a config implying far more weights than the file declares is refused before building', async () => {
    const m = files();
    for (const name of ['config.json', 'task.json']) {
      const json = JSON.parse(new TextDecoder().decode(m.get(name)));
      const cfg = name === 'config.json' ? json.config : json.config.backbone.config;
      cfg.vocabulary_size = 50_000_000;
      m.set(name, new TextEncoder().encode(JSON.stringify(json)));
    }
    const before = tf.memory().numBytes;
    const t0 = Date.now();
    await expect(loadKerasHubPreset(m)).rejects.toThrow(/implies at least 800\d+ weight values/);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(tf.memory().numBytes).toBe(before);
  });

  it('a missing config.json names itself', async () => {
    const m = files();
    m.delete('config.json');
    await expect(loadKerasHubPreset(m)).rejects.toThrow('missing file config.json');
  });
});

describe('a preset that fails to load frees the model it had built', () => {
  beforeAll(() => tf.setBackend('cpu'));
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

describe("a preset's tokenizer asset that does not parse", () => {
  beforeAll(() => tf.setBackend('cpu'));
  it('is named with its place in the preset, by the function called', async () => {
    await rejectsWithoutLeak(
      () => loadKerasHubPreset(gpt2With('assets/tokenizer/vocabulary.json', () => 'x')),
      /^loadKerasHubPreset: the files given\/assets\/tokenizer: vocabulary\.json is not valid JSON/,
    );
  });
});

describe('a preset over http fetches nothing outside its base URL', () => {
  beforeAll(() => tf.setBackend('cpu'));
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

  it("names a URL preset's files at their URLs (one slash after the base)", async () => {
    await expect(
      load(url, {fetch: async () => new Response('{"class_name": ', {status: 200})}),
    ).rejects.toThrow(
      /^loadKerasHubPreset: https:\/\/example\.com\/gpt2\/config\.json is not valid JSON/,
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

describe('loadKerasModel names itself in the errors of the keras-hub route', () => {
  beforeAll(() => tf.setBackend('cpu'));
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
      path.join(__dirname, '..', '..', 'fixtures', 'keras_files', 'functional.keras'),
      () => '<html></html>',
    );
    await rejectsWithoutLeak(
      () => loadKerasModel(bytes),
      /^loadKerasModel: the bytes given\/config\.json is not valid JSON/,
    );
  });

  it('a plain .keras with a layer class neither tfjs nor the package has: what to register', async () => {
    const file = path.join(__dirname, '..', '..', 'fixtures', 'keras_files', 'functional.keras');
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

describe("a preset's tokenizer is read through the preset's own source", () => {
  beforeAll(() => tf.setBackend('cpu'));

  it('a Map of Blobs: tokenizer.json and the declared assets read once each, nothing else of assets/', async () => {
    const reads: string[] = [];
    /** A file of the Map that records each time its bytes are read. */
    class CountedBlob extends Blob {
      constructor(
        bytes: Uint8Array,
        readonly rel: string,
      ) {
        super([bytes as BlobPart]);
      }
      override async arrayBuffer(): Promise<ArrayBuffer> {
        reads.push(this.rel);
        return super.arrayBuffer();
      }
    }
    const files = filesOf(path.join(DIR, 'gpt2'));
    files.set('assets/tokenizer/not_declared.json', enc('{}'));
    const counted = new Map([...files].map(([rel, bytes]) => [rel, new CountedBlob(bytes, rel)]));
    const before = tf.memory().numTensors;
    const preset = await loadKerasHubPreset(counted);
    expect(preset.tokenizer?.encode('Hello world')).toEqual(
      (await loadTokenizer(path.join(DIR, 'gpt2'))).encode('Hello world'),
    );
    preset.dispose();
    expect(tf.memory().numTensors).toBe(before);
    const tokenizerReads = reads.filter((r) => r === 'tokenizer.json' || r.startsWith('assets/'));
    expect(tokenizerReads).toEqual([
      'tokenizer.json',
      'assets/tokenizer/vocabulary.json',
      'assets/tokenizer/merges.txt',
    ]);
  });
});
