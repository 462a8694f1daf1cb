/**
 * SentencePieceTokenizer from a keras-hub preset (`save_to_preset` of keras-hub 0.32's
 * SentencePieceTokenizer, fixtures/sentencepiece_models.py): loadTokenizer reads the binary
 * `vocabulary.spm`; tokenizerFromPreset takes its bytes; a family's subclass inherits
 * `fileAssets` and `fromPreset`; a malformed model is refused in Keras' style.
 */
import * as fs from 'fs';
import * as path from 'path';

import {loadTokenizer, SentencePieceTokenizer, tokenizerFromPreset} from '../../src';
import type {SentencePieceTokenizerOptions} from '../../src';

const FIXTURES = path.join(__dirname, '..', 'fixtures', 'sentencepiece');
const PRESET = path.join(FIXTURES, 'preset');
const expected = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'expected.json'), 'utf8')) as {
  texts: string[];
  models: Record<string, {ids: number[][]}>;
};
const want = expected.models.bpe_identity;
const spm = (): Uint8Array =>
  new Uint8Array(fs.readFileSync(path.join(PRESET, 'assets', 'tokenizer', 'vocabulary.spm')));
const tokenizerJson = (): unknown =>
  JSON.parse(fs.readFileSync(path.join(PRESET, 'tokenizer.json'), 'utf8'));

/** A family's tokenizer as the doc comment of SentencePieceTokenizer shows it. */
class TurnTokenizer extends SentencePieceTokenizer {
  static override get className(): string {
    return 'TurnTokenizer';
  }
  constructor(options: SentencePieceTokenizerOptions) {
    super(options, 'TurnTokenizer');
    this.startTokenId = this.special('<s>');
    this.endTokenId = this.special('<end_of_turn>');
    this.stopTokenIds = [this.endTokenId];
  }
}

describe('SentencePieceTokenizer presets', () => {
  it('loadTokenizer reads a keras-hub preset folder (binary vocabulary.spm) with keras-hub ids', async () => {
    const tokenizer = await loadTokenizer(PRESET);
    expect(tokenizer).toBeInstanceOf(SentencePieceTokenizer);
    expected.texts.forEach((text, i) => expect(tokenizer.encode(text)).toEqual(want.ids[i]));
  });

  it('tokenizerFromPreset takes the bytes of vocabulary.spm', () => {
    const tokenizer = tokenizerFromPreset(tokenizerJson(), {'vocabulary.spm': spm()});
    expect(tokenizer.encode(expected.texts[0])).toEqual(want.ids[0]);
  });

  it('tokenizerFromPreset refuses vocabulary.spm given as text', () => {
    expect(() => tokenizerFromPreset(tokenizerJson(), {'vocabulary.spm': 'abc'})).toThrow(
      'loadTokenizer: SentencePieceTokenizer reads vocabulary.spm as bytes; expected a ' +
        'Uint8Array, received a string.',
    );
  });

  it('honours the config add_bos and add_eos', () => {
    const json = tokenizerJson() as {config: Record<string, unknown>};
    json.config.add_bos = true;
    json.config.add_eos = true;
    const tokenizer = tokenizerFromPreset(json, {'vocabulary.spm': spm()});
    const plain = new SentencePieceTokenizer({proto: spm()});
    expect(tokenizer.encode('hello')).toEqual([
      plain.tokenToId('<s>'),
      ...plain.encode('hello'),
      plain.tokenToId('</s>'),
    ]);
  });

  it('a subclass inherits fileAssets and fromPreset and sets its special tokens', () => {
    expect(TurnTokenizer.fileAssets).toEqual(['vocabulary.spm']);
    const json = tokenizerJson() as {config: Record<string, unknown>};
    const asset = Object.assign(
      (name: string): string => {
        throw new Error(`no text asset ${name}`);
      },
      {bytes: (name: string) => (name === 'vocabulary.spm' ? spm() : new Uint8Array(0))},
    );
    const tokenizer = TurnTokenizer.fromPreset(json.config, asset);
    expect(tokenizer).toBeInstanceOf(TurnTokenizer);
    expect(tokenizer.endTokenId).toBe(tokenizer.tokenToId('<end_of_turn>'));
    expect(tokenizer.encode('<end_of_turn>')).toEqual([tokenizer.endTokenId]);
    expect(
      () => new TurnTokenizer({proto: new SentencePieceTokenizer({proto: spm()}) as never}),
    ).toThrow('TurnTokenizer: expected options.proto to be the bytes of a SentencePiece model');
  });
});
