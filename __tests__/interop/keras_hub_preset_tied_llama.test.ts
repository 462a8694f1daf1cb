/**
 * The tied Llama that keras-hub 0.32 writes (fixtures/hub_presets.py, case llama3_tied): its
 * `LlamaBackbone.get_config` drops `tie_word_embeddings`, so the preset's config says untied while
 * model.weights.h5 holds one embedding table (keras-hub cannot load it back). Loaded as tied, with
 * a note, and compared with keras-hub's outputs recorded before saving: greedy generate() strings
 * exactly, logits within 1e-4; a weights file that fits neither reading is refused.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import {generateText, loadKerasHubPreset} from '../../src';
import {writeHdf5} from '../../src/io/hdf5_writer';

const DIR = path.join(__dirname, '..', 'fixtures', 'hub_presets');
const FOLDER = path.join(DIR, 'llama3_tied');
const TOL = 1e-4;

interface Expected {
  prompts: string[];
  prompt_ids: number[][];
  generate: Record<string, string[]>;
  generate_one: string;
  token_ids: number[][];
  padding_mask: number[][];
  logits: number[][][];
  keras_hub_reload_error: string;
}

const e = JSON.parse(
  fs.readFileSync(path.join(DIR, 'llama3_tied.expected.json'), 'utf8'),
) as Expected;

/** Every file of a folder by its path inside it. */
function filesOf(dir: string, under = ''): Map<string, Uint8Array> {
  const out = new Map<string, Uint8Array>();
  for (const f of fs.readdirSync(path.join(dir, under), {withFileTypes: true})) {
    const rel = under === '' ? f.name : `${under}/${f.name}`;
    if (f.isDirectory()) for (const [k, v] of filesOf(dir, rel)) out.set(k, v);
    else out.set(rel, new Uint8Array(fs.readFileSync(path.join(dir, rel))));
  }
  return out;
}

const table = (rows: number, cols: number) => ({
  shape: [rows, cols],
  dtype: 'float32' as const,
  data: new Uint8Array(rows * cols * 4),
});

describe.each(['cpu', 'wasm'])('the tied Llama keras-hub 0.32 writes, on %s', (backend) => {
  beforeAll(async () => {
    await tf.setBackend(backend);
    await tf.ready();
  });

  it('its config has no tie_word_embeddings and its weights one table: loaded tied, with a note, generating keras-hub tokens', async () => {
    const config = JSON.parse(fs.readFileSync(path.join(FOLDER, 'config.json'), 'utf8')) as {
      config: Record<string, unknown>;
    };
    expect('tie_word_embeddings' in config.config).toBe(false);
    expect(e.keras_hub_reload_error).toMatch(/could not be loaded/);
    const before = tf.memory().numTensors;
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    const preset = await loadKerasHubPreset(FOLDER);
    // (tfjs' own hint to install tfjs-node aside)
    const notes = warn.mock.calls.filter(([m]) => String(m).startsWith('loadKerasHubPreset'));
    expect(notes).toEqual([
      [
        expect.stringMatching(
          /^loadKerasHubPreset: .*llama3_tied: config has no tie_word_embeddings \(keras-hub 0\.32 does not write it\) and the weights hold one embedding table \(layers\/reversible_embedding\/vars\/0\): loaded with tied embeddings$/,
        ),
      ],
    ]);
    warn.mockRestore();
    expect(e.prompts.map((p) => preset.tokenizer?.encode(p))).toEqual(e.prompt_ids);
    for (const [maxLength, strings] of Object.entries(e.generate)) {
      expect(await generateText(preset, e.prompts, {maxLength: Number(maxLength)})).toEqual(
        strings,
      );
    }
    expect(await generateText(preset, e.prompts[0], {maxLength: 12})).toEqual([e.generate_one]);
    const ids = tf.tensor2d(e.token_ids, undefined, 'int32');
    const mask = tf.tensor2d(e.padding_mask, undefined, 'int32');
    const out = preset.model.predict([ids, mask]) as tf.Tensor;
    const got = (await out.data()) as Float32Array;
    const want = e.logits.flat(2);
    expect(got.length).toBe(want.length);
    expect(want.reduce((m, v, i) => Math.max(m, Math.abs(v - got[i])), 0)).toBeLessThan(TOL);
    tf.dispose([ids, mask, out]);
    preset.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('a Llama preset without tie_word_embeddings whose weights fit neither reading', () => {
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  it('three embedding tables: refused, naming what was expected and received, nothing allocated', async () => {
    const files = filesOf(FOLDER);
    files.set(
      'model.weights.h5',
      writeHdf5({
        layers: {
          reversible_embedding: {
            vars: {'0': table(310, 16), '1': table(16, 310), '2': table(310, 16)},
          },
        },
      }),
    );
    const before = tf.memory().numTensors;
    await expect(loadKerasHubPreset(files)).rejects.toThrow(
      'Llama3Backbone: config has no tie_word_embeddings (keras-hub 0.32 does not write it), so ' +
        'the weights decide; expected one token embedding table at ' +
        'layers/reversible_embedding/vars/0 (tied) or two, the table and its reverse (untied); ' +
        'received 3: layers/reversible_embedding/vars/0 [310, 16], ' +
        'layers/reversible_embedding/vars/1 [16, 310], layers/reversible_embedding/vars/2 [310, 16]',
    );
    expect(tf.memory().numTensors).toBe(before);
  });
});
