/** keras-hub's BertTokenizer (keras_hub/src/models/bert/bert_tokenizer.py): WordPiece. */
import type {TokenizerSplit} from '../../tokenizers/byte_pair';
import {wordPiecePresetOptions} from '../../tokenizers/preset_tokenizer';
import type {TokenizerAsset, TokenizerConfig} from '../../tokenizers/preset_tokenizer';
import {sortedIds} from '../../tokenizers/tokenizer';
import {WordPieceTokenizer} from '../../tokenizers/word_piece';
import type {WordPieceTokenizerOptions} from '../../tokenizers/word_piece';

/**
 * keras-hub's BertTokenizer: `[CLS]` starts, `[SEP]` ends, `[PAD]` pads, `[MASK]` masks.
 *
 * @example
 * ```js
 * const tokenizer = await loadTokenizer('presets/bert'); // a keras-hub preset folder
 * [tokenizer.startTokenId, ...tokenizer.encode('Hello world'), tokenizer.endTokenId];
 * ```
 */
export class BertTokenizer extends WordPieceTokenizer {
  static override get className(): string {
    return 'BertTokenizer';
  }
  static override fromPreset(
    config: TokenizerConfig,
    asset: TokenizerAsset,
    _split: TokenizerSplit,
  ): BertTokenizer {
    return new BertTokenizer(wordPiecePresetOptions(config, asset));
  }

  /** The id of `[MASK]`. */
  readonly maskTokenId: number;

  constructor(options: WordPieceTokenizerOptions) {
    super(options, 'BertTokenizer', ['[CLS]', '[SEP]', '[PAD]', '[MASK]']);
    this.startTokenId = this.tokenToId('[CLS]');
    this.endTokenId = this.tokenToId('[SEP]');
    this.padTokenId = this.tokenToId('[PAD]');
    this.maskTokenId = this.tokenToId('[MASK]') as number;
    this.stopTokenIds = [this.endTokenId as number];
    this.specialTokenIds = sortedIds([
      this.startTokenId as number,
      this.endTokenId as number,
      this.padTokenId as number,
      this.maskTokenId,
    ]);
  }
}
