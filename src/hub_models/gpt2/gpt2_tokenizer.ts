/** keras-hub's GPT2Tokenizer (keras_hub/src/models/gpt2/gpt2_tokenizer.py): byte-level BPE. */
import {BytePairTokenizer} from '../../tokenizers/byte_pair';
import type {BytePairTokenizerOptions, TokenizerSplit} from '../../tokenizers/byte_pair';
import {bytePairPresetOptions} from '../../tokenizers/preset_tokenizer';
import type {TokenizerAsset, TokenizerConfig} from '../../tokenizers/preset_tokenizer';

/**
 * GPT-2's tokenizer (keras-hub's GPT2Tokenizer): `<|endoftext|>` is start, end and unsplittable.
 *
 * @example
 * ```js
 * const tokenizer = await loadTokenizer('presets/gpt2'); // a keras-hub preset folder
 * tokenizer.encode('Hello world<|endoftext|>');
 * ```
 */
export class GPT2Tokenizer extends BytePairTokenizer {
  static override get className(): string {
    return 'GPT2Tokenizer';
  }
  static override fromPreset(
    config: TokenizerConfig,
    asset: TokenizerAsset,
    split: TokenizerSplit,
  ): GPT2Tokenizer {
    return new GPT2Tokenizer(bytePairPresetOptions(config, asset, split));
  }

  constructor(options: BytePairTokenizerOptions) {
    super(
      {...options, unsplittableTokens: options.unsplittableTokens ?? ['<|endoftext|>']},
      'GPT2Tokenizer',
      'gpt2',
    );
    const eos = this.special('<|endoftext|>');
    this.startTokenId = eos;
    this.endTokenId = eos;
    this.padTokenId = 0;
    this.stopTokenIds = [eos];
    this.specialTokenIds = [eos];
  }
}
