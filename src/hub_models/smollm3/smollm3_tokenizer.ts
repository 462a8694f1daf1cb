/** keras-hub's SmolLM3Tokenizer (keras_hub/src/models/smollm3/smollm3_tokenizer.py): byte-level BPE. */
import {BytePairTokenizer} from '../../tokenizers/byte_pair';
import type {BytePairTokenizerOptions, TokenizerSplit} from '../../tokenizers/byte_pair';
import {bytePairPresetOptions} from '../../tokenizers/preset_tokenizer';
import type {TokenizerAsset, TokenizerConfig} from '../../tokenizers/preset_tokenizer';
import {sortedIds} from '../../tokenizers/tokenizer';

/** keras-hub's special tokens of SmolLM3's tokenizer, in its order. */
export const SMOLLM3_SPECIAL_TOKENS: readonly string[] = [
  '<|end_of_text|>',
  '<|begin_of_text|>',
  '<think>',
  '</think>',
];

/**
 * SmolLM3's tokenizer (keras-hub's SmolLM3Tokenizer): no start token (keras-hub's
 * `start_token_id` is None: the preprocessor puts nothing first), `<|end_of_text|>` ends (and
 * stops generation), padding id 0; `<|begin_of_text|>`, `<think>` and `</think>` are special
 * tokens too (unsplittable, stripped from generated text).
 *
 * @example
 * ```js
 * const tokenizer = await loadTokenizer('presets/smollm3'); // a keras-hub preset folder
 * tokenizer.encode('<think>Hi!</think>');
 * ```
 */
export class SmolLM3Tokenizer extends BytePairTokenizer {
  static override get className(): string {
    return 'SmolLM3Tokenizer';
  }
  static override fromPreset(
    config: TokenizerConfig,
    asset: TokenizerAsset,
    split: TokenizerSplit,
  ): SmolLM3Tokenizer {
    return new SmolLM3Tokenizer(bytePairPresetOptions(config, asset, split));
  }

  constructor(options: BytePairTokenizerOptions) {
    super(
      {...options, unsplittableTokens: options.unsplittableTokens ?? SMOLLM3_SPECIAL_TOKENS},
      'SmolLM3Tokenizer',
      'llama3',
    );
    const ids = SMOLLM3_SPECIAL_TOKENS.map((t) => this.special(t));
    this.endTokenId = ids[0];
    this.padTokenId = 0;
    this.stopTokenIds = [this.endTokenId];
    this.specialTokenIds = sortedIds(ids);
  }
}
