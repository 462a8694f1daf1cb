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

const utf8 = (hex: string): string =>
  new TextDecoder('utf-8', {ignoreBOM: true}).decode(Buffer.from(hex, 'hex'));

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

describe('SentencePieceTokenizer: malformed models', () => {
  const good = modelBytes('bpe_identity');

  it('refuses a truncated vocabulary.spm naming the byte and the problem', () => {
    expect(() => new SentencePieceTokenizer({proto: good.subarray(0, good.length - 3)})).toThrow(
      /^SentencePieceTokenizer: the SentencePiece model: malformed protobuf at byte \d+: field \d+ declares \d+ bytes, \d+ remain\.$/,
    );
  });

  it('refuses text that is not a model proto', () => {
    const json = new TextEncoder().encode('{"vocabulary": ["a", "b"]}');
    expect(() => new SentencePieceTokenizer({proto: json})).toThrow(
      'SentencePieceTokenizer: the SentencePiece model: malformed protobuf at byte 0: field 15 ' +
        'has wire type 3; expected 0 (varint), 1 (64-bit), 2 (length-delimited) or 5 (32-bit).',
    );
  });

  it('refuses a model without pieces, without an unknown piece, or of another model type', () => {
    expect(() => new SentencePieceTokenizer({proto: Uint8Array.from([0x1a, 0x00])})).toThrow(
      'SentencePieceTokenizer: the SentencePiece model has no pieces; expected a vocabulary ' +
        '(ModelProto.pieces).',
    );
    // one normal piece "a"
    const onePiece = Uint8Array.from([0x0a, 0x03, 0x0a, 0x01, 0x61]);
    expect(() => new SentencePieceTokenizer({proto: onePiece})).toThrow(
      'SentencePieceTokenizer: the SentencePiece model has no unknown piece; expected one piece ' +
        'of type UNKNOWN (<unk>).',
    );
    // trainer_spec {model_type: WORD}
    const word = Uint8Array.from([0x0a, 0x03, 0x0a, 0x01, 0x61, 0x12, 0x02, 0x18, 0x03]);
    expect(() => new SentencePieceTokenizer({proto: word})).toThrow(
      'SentencePieceTokenizer: the SentencePiece model has model_type 3; expected 1 (UNIGRAM) ' +
        'or 2 (BPE) (WORD and CHAR models are not implemented).',
    );
  });

  it('refuses options without the bytes of a model', () => {
    expect(() => new SentencePieceTokenizer({proto: 'vocabulary.spm' as never})).toThrow(
      'SentencePieceTokenizer: expected options.proto to be the bytes of a SentencePiece model ' +
        '(a non-empty Uint8Array or ArrayBuffer, vocabulary.spm), received string.',
    );
  });

  it('refuses ids outside the vocabulary when decoding', () => {
    const tokenizer = new SentencePieceTokenizer({proto: good});
    expect(() => tokenizer.decode([5, tokenizer.vocabularySize])).toThrow(
      `SentencePieceTokenizer.decode: token id ${tokenizer.vocabularySize} at position 1 is not ` +
        `in the vocabulary (expected a whole number in [0, ${tokenizer.vocabularySize - 1}]).`,
    );
  });
});
