/**
 * The toy family's `ToyTokenizer` (fixtures/toy_family.py): words split on whitespace, each
 * looked up in the vocabulary (`<unk>` when absent); ids joined back with one space. Its
 * vocabulary is the asset `vocabulary.txt` (one token a line, keras-hub's `file_assets`);
 * special tokens `<s>` (start), `</s>` (end, the stop token) and `<pad>`.
 */
import type {Tokenizer, TokenizerAsset, TokenizerConfig} from '../../../src';

/** The whitespace TensorFlow's `tf.strings.split(text)` splits on (runs, ends dropped). */
const WHITESPACE = /[ \t\n\r\v\f]+/;

export class ToyTokenizer implements Tokenizer {
  /** keras-hub's class name (tokenizer.json's `class_name`). */
  static readonly className = 'ToyTokenizer';
  /** The assets the class reads from `assets/<config_file stem>/` (keras-hub's `file_assets`). */
  static readonly fileAssets: readonly string[] = ['vocabulary.txt'];

  /**
   * The tokenizer of a preset: tokenizer.json's `config` and the text of each of
   * {@link fileAssets} by name.
   */
  static fromPreset(config: TokenizerConfig, asset: TokenizerAsset): ToyTokenizer {
    void config; // the vocabulary is the asset; the config holds nothing else it reads
    const text = asset('vocabulary.txt');
    const lines = text.split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    return new ToyTokenizer(lines);
  }

  readonly vocabularySize: number;
  readonly startTokenId: number;
  readonly endTokenId: number;
  readonly padTokenId: number;
  private readonly ids: Map<string, number>;
  private readonly unknownId: number;

  constructor(private readonly vocabulary: readonly string[]) {
    this.ids = new Map(vocabulary.map((token, i) => [token, i]));
    if (this.ids.size !== vocabulary.length) {
      throw new Error(`ToyTokenizer: expected distinct tokens, received a repeated one`);
    }
    const id = (token: string): number => {
      const found = this.ids.get(token);
      if (found === undefined) {
        throw new Error(
          `ToyTokenizer: expected the vocabulary to hold ${JSON.stringify(token)}; it has ` +
            `${vocabulary.length} tokens and not this one`,
        );
      }
      return found;
    };
    this.vocabularySize = vocabulary.length;
    this.startTokenId = id('<s>');
    this.endTokenId = id('</s>');
    this.padTokenId = id('<pad>');
    this.unknownId = id('<unk>');
  }

  encode(text: string): number[] {
    return text
      .split(WHITESPACE)
      .filter((w) => w !== '')
      .map((w) => this.ids.get(w) ?? this.unknownId);
  }

  decode(ids: number[]): string {
    return ids
      .map((id, i) => {
        const token = this.vocabulary[id];
        if (!Number.isInteger(id) || token === undefined) {
          throw new Error(
            `ToyTokenizer.decode: expected token ids in [0, ${this.vocabularySize - 1}], ` +
              `received ${String(id)} at position ${i}`,
          );
        }
        return token;
      })
      .join(' ');
  }

  tokenToId(token: string): number | undefined {
    return this.ids.get(token);
  }

  idToToken(id: number): string | undefined {
    return this.vocabulary[id];
  }
}
