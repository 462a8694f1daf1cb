/**
 * SentencePieceTokenizer against keras-hub 0.32's SentencePieceTokenizer (tensorflow-text 2.21,
 * sentencepiece 0.2.3) on tiny trained models (fixtures/sentencepiece_models.py): BPE with byte
 * fallback and unigram, nmt_nfkc and identity normalization, with and without the dummy prefix
 * and extra whitespace removal, user-defined and control symbols. Every text's ids (keras-hub in
 * a tf.data pipeline; its eager path gave the same ids) and every detokenized string must be
 * identical.
 */
import * as fs from 'fs';
import * as path from 'path';

import {SentencePieceTokenizer} from '../../src/tokenizers/sentence_piece';

const FIXTURES = path.join(__dirname, '..', 'fixtures', 'sentencepiece');

interface ModelExpected {
  vocabulary_size: number;
  ids: number[][];
  eager_differs: number[];
  decoded_hex: string[];
  decode_cases: number[][];
  decode_cases_hex: string[];
  pieces: string[];
}
interface Expected {
  texts: string[];
  models: Record<string, ModelExpected>;
}

const expected = JSON.parse(
  fs.readFileSync(path.join(FIXTURES, 'expected.json'), 'utf8'),
) as Expected;
const MODELS = Object.keys(expected.models);

/** The model's bytes as keras-hub stores them (vocabulary.spm). */
function modelBytes(name: string): Uint8Array {
  return new Uint8Array(fs.readFileSync(path.join(FIXTURES, `${name}.spm`)));
}

const utf8 = (hex: string): string => new TextDecoder().decode(Buffer.from(hex, 'hex'));

describe('SentencePieceTokenizer: keras-hub ids and strings', () => {
  it('the fixture has every kind of model and its eager path agrees with tf.data', () => {
    expect(MODELS.sort()).toEqual(
      ['bpe_identity', 'bpe_nfkc', 'bpe_rules', 'unigram_identity', 'unigram_nfkc'].sort(),
    );
    for (const name of MODELS) expect(expected.models[name].eager_differs).toEqual([]);
  });

  describe.each(MODELS)('%s', (name) => {
    const want = expected.models[name];
    const tokenizer = new SentencePieceTokenizer({proto: modelBytes(name)});

    it('has keras-hub vocabulary', () => {
      expect(tokenizer.vocabularySize).toBe(want.vocabulary_size);
      const pieces = Array.from({length: tokenizer.vocabularySize}, (_, i) =>
        tokenizer.idToToken(i),
      );
      expect(pieces).toEqual(want.pieces);
      want.pieces.forEach((piece, id) => expect(tokenizer.tokenToId(piece)).toBe(id));
    });

    it('encodes every text of the corpus to keras-hub ids', () => {
      const mismatches = expected.texts
        .map((text, i) => ({text, got: tokenizer.encode(text), want: want.ids[i]}))
        .filter(({got, want}) => JSON.stringify(got) !== JSON.stringify(want));
      expect(mismatches).toEqual([]);
    });

    it('decodes every text ids to keras-hub detokenized strings', () => {
      const mismatches = want.ids
        .map((ids, i) => ({ids, got: tokenizer.decode(ids), want: utf8(want.decoded_hex[i])}))
        .filter(({got, want}) => got !== want);
      expect(mismatches).toEqual([]);
    });

    it('decodes hand-picked ids (control, unknown, lone bytes, every id) as keras-hub', () => {
      const mismatches = want.decode_cases
        .map((ids, i) => ({ids, got: tokenizer.decode(ids), want: utf8(want.decode_cases_hex[i])}))
        .filter(({got, want}) => got !== want);
      expect(mismatches).toEqual([]);
    });
  });
});
