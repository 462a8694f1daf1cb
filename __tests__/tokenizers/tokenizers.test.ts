/**
 * keras-hub's tokenizers against fixtures made by keras-hub 0.32 and Hugging Face tokenizers
 * (fixtures/tokenizer_fixtures.py): every text's ids, the decoded strings (lossy UTF-8), the
 * special tokens, and loading the preset folders. The references are independent of this code:
 * ids come from keras-hub in a tf.data pipeline and from Hugging Face's tokenizers.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  BertTokenizer,
  BytePairTokenizer,
  GPT2Tokenizer,
  Llama3Tokenizer,
  loadTokenizer,
  tokenizerFromPreset,
  WordPieceTokenizer,
} from '../../src';
import type {Tokenizer} from '../../src';
import {loadKerasHubPreset} from '../../src/interop/keras_hub_preset';

const FIXTURES = path.join(__dirname, '..', '..', 'fixtures', 'tokenizers');

interface Case {
  text: string;
  tfdata: number[];
  eager: number[];
  hf: number[];
  decoded: string;
  decodedHex: string;
  hfDecoded: string;
}
interface Expected {
  class: string;
  /** keras-hub's CausalLM.generate stop ids ("auto") and tokenizer.special_token_ids, ascending. */
  stopTokenIds: number[];
  specialTokenIds: number[];
  cases: Case[];
  /** [text, keras-hub tf.data ids, Hugging Face ids] (byte-level BPE only). */
  corpus: [string, number[], number[]][];
  decodes: {ids: number[]; decoded: string; decodedHex: string}[];
}

function expected(name: string): Expected {
  return JSON.parse(
    fs.readFileSync(path.join(FIXTURES, name, 'expected.json'), 'utf8'),
  ) as Expected;
}

const BPE = ['gpt2', 'llama3'] as const;
const WORD_PIECE = ['bert_uncased', 'bert_cased'] as const;
const loaded = new Map<string, Tokenizer>();

beforeAll(async () => {
  for (const name of [...BPE, ...WORD_PIECE]) {
    loaded.set(name, await loadTokenizer(path.join(FIXTURES, name)));
  }
  for (const name of BPE) {
    loaded.set(`${name}/model`, await loadTokenizer(path.join(FIXTURES, name), {split: 'model'}));
  }
});

/** The tokenizer of a fixture preset: keras-hub's split (default), or the model's. */
function tokenizer(name: string, split: 'keras-hub' | 'model' = 'keras-hub'): Tokenizer {
  return loaded.get(split === 'model' ? `${name}/model` : name) as Tokenizer;
}

/** Every text of a fixture: the 47 cases and the split corpus, as [text, tf.data ids, HF ids]. */
function allTexts(fixture: Expected): [string, number[], number[]][] {
  return [
    ...fixture.cases.map((c): [string, number[], number[]] => [c.text, c.tfdata, c.hf]),
    ...fixture.corpus,
  ];
}

describe('byte-level BPE: ids of every fixture text', () => {
  for (const name of BPE) {
    const fixture = expected(name);
    test(`${name}: ${fixture.class} from the preset folder equals keras-hub's tf.data ids on all ${fixture.cases.length + fixture.corpus.length} texts`, () => {
      expect(tokenizer(name).constructor.name).toBe(fixture.class);
      expect(fixture.corpus.length).toBeGreaterThanOrEqual(300);
      for (const [text, tfdata] of allTexts(fixture)) {
        expect({text, ids: tokenizer(name).encode(text)}).toEqual({text, ids: tfdata});
      }
    });
    test(`${name}: with split 'model' it equals Hugging Face's ids (the model's own regex)`, () => {
      for (const [text, , hf] of allTexts(fixture)) {
        expect({text, ids: tokenizer(name, 'model').encode(text)}).toEqual({text, ids: hf});
      }
      // the corpus is built around the texts where the two differ
      const differ = allTexts(fixture).filter(([, a, b]) => !equal(a, b)).length;
      expect(differ).toBeGreaterThanOrEqual(20);
    });
    test(`${name}: decode equals keras-hub's detokenize (lossy UTF-8) and round-trips`, () => {
      for (const c of fixture.cases) {
        const ids = tokenizer(name).encode(c.text);
        expect(tokenizer(name).decode(c.tfdata)).toBe(c.decoded);
        expect(tokenizer(name).decode(ids)).toBe(c.text);
        expect(c.hfDecoded).toBe(c.text);
      }
      for (const d of fixture.decodes) {
        expect({ids: d.ids, text: tokenizer(name).decode(d.ids)}).toEqual({
          ids: d.ids,
          text: d.decoded,
        });
      }
    });
  }

  test("gpt2: lossy UTF-8 gives one U+FFFD per maximal invalid run, as Python's errors='replace'", () => {
    const d = expected('gpt2').decodes;
    // Independent of the fixture: the bytes keras-hub produced, decoded by Node's own decoder.
    for (const {decodedHex, decoded} of d) {
      expect(Buffer.from(decodedHex, 'hex').toString('utf8')).toBe(decoded);
    }
    expect(d[0].decoded).toBe('\ufffd');
    expect(d[2].decoded).toBe('\ufffd\ufffd');
    expect(d[3].decoded).toBe('\ufffd語');
  });

  test('a leading byte order mark survives encode and decode (Python keeps it too)', () => {
    for (const name of BPE) {
      expect(tokenizer(name).decode(tokenizer(name).encode('\ufeffhi'))).toBe('\ufeffhi');
    }
  });
});

describe('byte-level BPE: special tokens and splitting', () => {
  test('gpt2: <|endoftext|> is one id inside text, start, end; pad 0', () => {
    const t = tokenizer('gpt2');
    const eos = t.tokenToId('<|endoftext|>') as number;
    expect(t.startTokenId).toBe(eos);
    expect(t.endTokenId).toBe(eos);
    expect(t.padTokenId).toBe(0);
    const ids = t.encode('hello<|endoftext|>world');
    expect(ids.filter((id) => id === eos)).toHaveLength(1);
    expect(t.idToToken(eos)).toBe('<|endoftext|>');
    expect(t.decode([eos])).toBe('<|endoftext|>');
  });

  test('llama3: begin / end / eot / header tokens are single ids', () => {
    const t = tokenizer('llama3') as Llama3Tokenizer;
    expect(t.startTokenId).toBe(t.tokenToId('<|begin_of_text|>'));
    expect(t.endTokenId).toBe(t.tokenToId('<|end_of_text|>'));
    const text = '<|begin_of_text|><|start_header_id|>user<|end_header_id|><|eot_id|>';
    const ids = t.encode(text);
    expect(ids[0]).toBe(t.startTokenId);
    expect(ids[1]).toBe(t.tokenToId('<|start_header_id|>'));
    expect(ids[ids.length - 1]).toBe(t.tokenToId('<|eot_id|>'));
    expect(t.decode(ids)).toBe(text);
  });

  test("the split regexes cut as GPT-2's and Llama 3's patterns do in Python's regex module", () => {
    // Expected pieces: regex.findall(pattern, text) with /work/venv-keras's regex 2026.11.19.
    const g = tokenizer('gpt2', 'model') as BytePairTokenizer;
    const l = tokenizer('llama3', 'model') as BytePairTokenizer;
    expect(g.split("I'm 12345 ok  \n")).toEqual(['I', "'m", ' 12345', ' ok', '  \n']);
    expect(l.split("I'M 12345 ok  \nx")).toEqual(['I', "'M", ' ', '123', '45', ' ok', '  \n', 'x']);
    expect(g.split('a\u0085b')).toEqual(['a', '\u0085', 'b']);
    expect(l.split("it'\u017f")).toEqual(['it', "'\u017f"]);
  });

  test("keras-hub's split: the pieces of keras-hub 0.32's split_strings_for_bpe", () => {
    // Expected pieces: keras_hub.src.tokenizers.byte_pair_tokenizer.split_strings_for_bpe(
    // tf.constant([text]), ["<|endoftext|>"]) in /work/venv-keras (tensorflow-text 2.21).
    const cases: [string, string[]][] = [
      ['a  b', ['a', ' ', ' b']],
      ['trailing  ', ['trailing', ' ', ' ']],
      ['x  \n y', ['x', '  \n', ' y']],
      ['end\u00a0\u00a0!', ['end', '\u00a0', '\u00a0', '!']],
      ['n\t\t42', ['n', '\t', '\t', '42']],
      ["it's 2026!!  ", ['it', "'s", ' 2026', '!!', ' ', ' ']],
      ['a<|endoftext|>b\u0000c<|endoftext|>d', ['a', '<|endoftext|>', 'b']],
      ['\u096c b', [' b']],
      [' <|endoftext|>  ', [' ', '<|endoftext|>', ' ', ' ']],
    ];
    const g = tokenizer('gpt2') as BytePairTokenizer;
    for (const [text, pieces] of cases)
      expect({text, pieces: g.split(text)}).toEqual({text, pieces});
    // GPT-2's own regex keeps a trailing run whole: one piece, where keras-hub has two
    expect((tokenizer('gpt2', 'model') as BytePairTokenizer).split('trailing  ')).toEqual([
      'trailing',
      '  ',
    ]);
  });

  test("split: 'keras-hub' is the default; another value is refused", async () => {
    const dir = path.join(FIXTURES, 'gpt2');
    const c = expected('gpt2').corpus.find(([t]) => t === 'word  ') as [string, number[], number[]];
    expect(c[1]).not.toEqual(c[2]);
    expect((await loadTokenizer(dir, {split: 'keras-hub'})).encode(c[0])).toEqual(c[1]);
    expect(tokenizer('gpt2').encode(c[0])).toEqual(c[1]);
    expect(tokenizer('gpt2', 'model').encode(c[0])).toEqual(c[2]);
    await expect(loadTokenizer(dir, {split: 'hf' as unknown as 'model'})).rejects.toThrow(
      "loadTokenizer: options.split must be 'keras-hub' or 'model', received \"hf\".",
    );
  });

  test('in-memory constructors: the keras-hub docstring example', () => {
    // keras-hub's BytePairTokenizer docstring: "butterfly" -> [3, 8], "butter" -> [3].
    const merge = ['b u', 't t', 'e r', 'bu tt', 'butt er', 'f l', 'fl y'];
    const tokens = [
      ...new Set(
        merge.flatMap((m) => {
          const [a, b] = m.split(' ');
          return [a, b, a + b];
        }),
      ),
    ].sort();
    const vocabulary = Object.fromEntries(tokens.map((t, i) => [t, i]));
    const t = new BytePairTokenizer({vocabulary, merges: merge});
    expect(t.encode('butterfly')).toEqual([3, 8]);
    expect(t.encode('butter')).toEqual([3]);
    expect(t.decode([3, 8])).toBe('butterfly');
    // keras-hub's GPT2Tokenizer docstring vocabulary, with ids 1-3 filled: ids must be
    // [0, vocabularySize).
    const gpt2 = new GPT2Tokenizer({
      vocabulary: {
        '<|endoftext|>': 0,
        b: 1,
        d: 2,
        e: 3,
        a: 4,
        Ġquick: 5,
        Ġfox: 6,
        Ġ: 7,
        q: 8,
        u: 9,
        i: 10,
        c: 11,
        k: 12,
        ui: 13,
        ck: 14,
        uick: 15,
        Ġq: 16,
        Ġf: 17,
        f: 18,
        o: 19,
        x: 20,
        ox: 21,
        '.': 22,
      },
      merges: ['Ġ q', 'u i', 'c k', 'ui ck', 'Ġq uick', 'Ġ f', 'o x', 'Ġf ox'],
    });
    expect(gpt2.encode('a quick fox.')).toEqual([4, 5, 6, 22]);
  });
});

describe('generation ids: the stop and special tokens of keras-hub 0.32', () => {
  for (const name of [...BPE, ...WORD_PIECE]) {
    test(`${name}: stopTokenIds and specialTokenIds are keras-hub's`, () => {
      const fixture = expected(name);
      const t = tokenizer(name);
      expect(t.stopTokenIds).toEqual(fixture.stopTokenIds);
      expect(t.specialTokenIds).toEqual(fixture.specialTokenIds);
    });
  }

  test('llama3: generation stops at <|end_of_text|> and <|eot_id|>; the header tokens are special', () => {
    const t = tokenizer('llama3');
    const fixture = expected('llama3');
    expect(fixture.stopTokenIds).toHaveLength(2);
    expect(fixture.stopTokenIds).toContain(t.tokenToId('<|eot_id|>'));
    expect(fixture.stopTokenIds).toContain(t.tokenToId('<|end_of_text|>'));
    for (const token of ['<|start_header_id|>', '<|end_header_id|>', '<|begin_of_text|>']) {
      expect(fixture.specialTokenIds).toContain(t.tokenToId(token));
    }
    expect(t.stopTokenIds).toEqual(fixture.stopTokenIds);
    expect(t.specialTokenIds).toEqual(fixture.specialTokenIds);
  });
});

describe('loadKerasHubPreset: the tokenizer of a Llama 3 preset', () => {
  const dir = path.join(__dirname, '..', 'fixtures', 'hub_presets', 'llama3');
  beforeAll(() => tf.setBackend('cpu'));

  test("it stops at <|end_of_text|> and <|eot_id|>, strips keras-hub's special tokens; split passes through", async () => {
    const preset = await loadKerasHubPreset(dir);
    const model = await loadKerasHubPreset(dir, {split: 'model'});
    try {
      const t = preset.tokenizer as BytePairTokenizer;
      const id = (token: string): number => t.tokenToId(token) as number;
      // keras-hub 0.32: generate stops at end_token_id and end_token2_id (<|eot_id|>), and its
      // postprocessing strips special_token_ids (bos, eos, the two header tokens, eot)
      expect(t.stopTokenIds).toEqual(
        [id('<|end_of_text|>'), id('<|eot_id|>')].sort((a, b) => a - b),
      );
      expect(t.specialTokenIds).toEqual(
        [
          '<|begin_of_text|>',
          '<|end_of_text|>',
          '<|start_header_id|>',
          '<|end_header_id|>',
          '<|eot_id|>',
        ]
          .map(id)
          .sort((a, b) => a - b),
      );
      expect(t.splitMode).toBe('keras-hub');
      expect((model.tokenizer as BytePairTokenizer).splitMode).toBe('model');
      const before = tf.memory().numTensors;
      await expect(loadKerasHubPreset(dir, {split: 'hf' as unknown as 'model'})).rejects.toThrow(
        "loadKerasHubPreset: expected options.split to be 'keras-hub' or 'model', received \"hf\"",
      );
      // the option is refused before anything is read: no tensor left behind
      expect(tf.memory().numTensors).toBe(before);
    } finally {
      preset.dispose();
      model.dispose();
    }
  });
});

describe('WordPiece: ids of every fixture text', () => {
  for (const name of WORD_PIECE) {
    const fixture = expected(name);
    test(`${name}: ${fixture.class} equals keras-hub's tf.data ids`, () => {
      expect(tokenizer(name).constructor.name).toBe(fixture.class);
      for (const c of fixture.cases) {
        expect({text: c.text, ids: tokenizer(name).encode(c.text)}).toEqual({
          text: c.text,
          ids: c.tfdata,
        });
        // keras-hub's eager path (plain Python) agrees with tf.data on these texts.
        expect(c.eager).toEqual(c.tfdata);
      }
    });
    test(`${name}: decode equals keras-hub's detokenize`, () => {
      for (const c of fixture.cases) {
        expect({text: c.text, decoded: tokenizer(name).decode(c.tfdata)}).toEqual({
          text: c.text,
          decoded: c.decoded,
        });
      }
      for (const d of fixture.decodes) expect(tokenizer(name).decode(d.ids)).toBe(d.decoded);
    });
  }

  test('bert: special ids, [UNK] for an unknown and an over-long word', () => {
    const t = tokenizer('bert_uncased') as BertTokenizer;
    expect(t.startTokenId).toBe(t.tokenToId('[CLS]'));
    expect(t.endTokenId).toBe(t.tokenToId('[SEP]'));
    expect(t.padTokenId).toBe(t.tokenToId('[PAD]'));
    const unk = t.tokenToId('[UNK]');
    expect(t.encode('a'.repeat(101))).toEqual([unk]);
    expect(t.encode('Straße')).toEqual(t.encode('strasse'));
  });

  test('in-memory WordPiece: the keras-hub docstring example', () => {
    const vocab = ['[UNK]', 'the', 'qu', '##ick', 'br', '##own', 'fox', '.'];
    const t = new WordPieceTokenizer({vocabulary: vocab, lowercase: true});
    expect(t.encode('The quick brown fox.')).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(t.decode([1, 2, 3, 4, 5, 6, 7])).toBe('the quick brown fox .');
    const words = new WordPieceTokenizer({vocabulary: vocab, split: false, lowercase: true});
    expect(words.encode('quick')).toEqual([2, 3]);
  });
});

describe('loadTokenizer: files and errors', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tok-'));
  });
  afterEach(() => fs.rmSync(dir, {recursive: true, force: true}));

  function copyPreset(name: string): void {
    fs.cpSync(path.join(FIXTURES, name), dir, {recursive: true});
  }

  test('a missing asset is an error naming the file', async () => {
    copyPreset('gpt2');
    fs.rmSync(path.join(dir, 'assets', 'tokenizer', 'merges.txt'));
    await expect(loadTokenizer(dir)).rejects.toThrow(/missing file assets\/tokenizer\/merges\.txt/);
    fs.rmSync(path.join(dir, 'tokenizer.json'));
    await expect(loadTokenizer(dir)).rejects.toThrow(/missing file tokenizer\.json/);
  });

  test('bad JSON is an error naming the file', async () => {
    copyPreset('gpt2');
    fs.writeFileSync(path.join(dir, 'assets', 'tokenizer', 'vocabulary.json'), '{"a": 1,');
    await expect(loadTokenizer(dir)).rejects.toThrow(/vocabulary\.json is not valid JSON/);
    fs.writeFileSync(path.join(dir, 'tokenizer.json'), 'not json');
    await expect(loadTokenizer(dir)).rejects.toThrow(/tokenizer\.json is not valid JSON/);
  });

  test('a deeply nested tokenizer.json or vocabulary.json is refused with a clear message', async () => {
    copyPreset('gpt2');
    // 100,000 levels: JSON.parse would overflow the stack ("Maximum call stack size exceeded")
    fs.writeFileSync(path.join(dir, 'tokenizer.json'), '['.repeat(100000) + ']'.repeat(100000));
    await expect(loadTokenizer(dir)).rejects.toThrow(
      'loadTokenizer: tokenizer.json nests arrays / objects more than 256 deep; expected at most 256 levels.',
    );
    copyPreset('gpt2');
    fs.writeFileSync(
      path.join(dir, 'assets', 'tokenizer', 'vocabulary.json'),
      '{"a": ' + '['.repeat(100000) + ']'.repeat(100000) + '}',
    );
    await expect(loadTokenizer(dir)).rejects.toThrow(
      'loadTokenizer: vocabulary.json nests arrays / objects more than 2 deep; expected at most 2 levels.',
    );
  });

  test('an unknown class is refused with the supported names', async () => {
    copyPreset('gpt2');
    const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
    config.class_name = 'GemmaTokenizer';
    fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(config));
    await expect(loadTokenizer(dir)).rejects.toThrow(
      /class_name must be one of GPT2Tokenizer.*received "GemmaTokenizer"/,
    );
  });

  test('a 2 GB vocabulary.json is refused before it is read', async () => {
    copyPreset('gpt2');
    const big = path.join(dir, 'assets', 'tokenizer', 'vocabulary.json');
    fs.rmSync(big);
    const fd = fs.openSync(big, 'w');
    fs.ftruncateSync(fd, 2 * 1024 ** 3); // sparse: no 2 GB on disk
    fs.closeSync(fd);
    const before = process.memoryUsage().rss;
    await expect(loadTokenizer(dir)).rejects.toThrow(
      /vocabulary\.json has 2147483648 bytes, over the limit of 67108864 bytes/,
    );
    expect(process.memoryUsage().rss - before).toBeLessThan(256 * 1024 * 1024);
    await expect(loadTokenizer(dir, {maxFileBytes: 100})).rejects.toThrow(
      /tokenizer\.json has \d+ bytes, over the limit of 100 bytes/,
    );
  });

  test('a URL: only tokenizer.json and the assets it names are fetched; Content-Length is checked', async () => {
    const requested: string[] = [];
    const fakeFetch = async (url: string): Promise<Response> => {
      requested.push(url);
      const file = path.join(
        FIXTURES,
        'bert_cased',
        new URL(url).pathname.replace('/presets/bert/', ''),
      );
      if (!fs.existsSync(file)) return new Response('', {status: 404});
      return new Response(fs.readFileSync(file));
    };
    const t = await loadTokenizer('https://example.test/presets/bert', {fetch: fakeFetch});
    expect(requested).toEqual([
      'https://example.test/presets/bert/tokenizer.json',
      'https://example.test/presets/bert/assets/tokenizer/vocabulary.txt',
    ]);
    expect(t.encode('Hello world')).toEqual(expected('bert_cased').cases[0].tfdata);
    const huge = async (): Promise<Response> =>
      new Response('{}', {headers: {'content-length': String(2 * 1024 ** 3)}});
    await expect(loadTokenizer('https://example.test/p/', {fetch: huge})).rejects.toThrow(
      /tokenizer\.json has 2147483648 bytes, over the limit/,
    );
    const missing = async (): Promise<Response> => new Response('', {status: 404});
    await expect(loadTokenizer('https://example.test/p/', {fetch: missing})).rejects.toThrow(
      /missing file tokenizer\.json/,
    );
  });

  test('tokenizerFromPreset builds from in-memory files; a missing asset is named', () => {
    const json = JSON.parse(
      fs.readFileSync(path.join(FIXTURES, 'llama3', 'tokenizer.json'), 'utf8'),
    );
    const read = (f: string): string =>
      fs.readFileSync(path.join(FIXTURES, 'llama3', 'assets', 'tokenizer', f), 'utf8');
    const t = tokenizerFromPreset(json, {
      'vocabulary.json': read('vocabulary.json'),
      'merges.txt': read('merges.txt'),
    });
    expect(t).toBeInstanceOf(Llama3Tokenizer);
    const c = expected('llama3').cases.find((x) => x.text === '3.14159 and 1,000,000') as Case;
    expect(c.tfdata).not.toEqual(c.hf);
    expect(t.encode(c.text)).toEqual(c.tfdata);
    const model = tokenizerFromPreset(
      json,
      {'vocabulary.json': read('vocabulary.json'), 'merges.txt': read('merges.txt')},
      {split: 'model'},
    );
    expect(model.encode(c.text)).toEqual(c.hf);
    expect(() => tokenizerFromPreset(json, {'vocabulary.json': read('vocabulary.json')})).toThrow(
      /Llama3Tokenizer needs the asset merges\.txt/,
    );
  });

  test('decode refuses an id outside the vocabulary, naming it', () => {
    const t = tokenizer('gpt2');
    expect(() => t.decode([1, 99999])).toThrow(
      /token id 99999 at position 1 is not in the vocabulary/,
    );
    expect(() => tokenizer('bert_cased').decode([-1])).toThrow(/token id -1 at position 0/);
  });

  test('a merge naming a token outside the vocabulary is refused as keras-hub does', () => {
    expect(() => new BytePairTokenizer({vocabulary: {a: 0, b: 1}, merges: ['a c']})).toThrow(
      "merge rule 'a c' contains token 'a' or 'c' that is not in the vocabulary",
    );
    expect(() => new GPT2Tokenizer({vocabulary: {a: 0}, merges: []})).toThrow(
      /GPT2Tokenizer: the vocabulary must contain the special token "<\|endoftext\|>"/,
    );
  });
});

function equal(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

describe('loadTokenizer given what is not a tokenizer folder', () => {
  const load = loadTokenizer as unknown as (s: unknown, o?: unknown) => Promise<unknown>;
  const gpt2 = path.join(FIXTURES, 'gpt2');

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
