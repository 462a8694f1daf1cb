/** keras-hub's Qwen3Tokenizer (keras_hub/src/models/qwen3/qwen3_tokenizer.py): byte-level BPE. */
import {BytePairTokenizer} from '../../tokenizers/byte_pair';
import type {BytePairTokenizerOptions, TokenizerSplit} from '../../tokenizers/byte_pair';
import {bytePairPresetOptions} from '../../tokenizers/preset_tokenizer';
import type {TokenizerAsset, TokenizerConfig} from '../../tokenizers/preset_tokenizer';
import {sortedIds} from '../../tokenizers/tokenizer';
import {qwenOptions} from '../qwen/qwen_tokenizer';

/**
 * Qwen 3's tokenizer (keras-hub's Qwen3Tokenizer): no start token, `<|im_end|>` ends (and stops
 * generation), `<|endoftext|>` pads; both unsplittable and stripped from generated text. The
 * `model` split is Qwen's regex ({@link qwenSplitPattern}).
 *
 * @example
 * ```js
 * const tokenizer = await loadTokenizer('presets/qwen3'); // a keras-hub preset folder
 * tokenizer.encode('Hello world<|im_end|>');
 * ```
 */
export class Qwen3Tokenizer extends BytePairTokenizer {
  static override get className(): string {
    return 'Qwen3Tokenizer';
  }
  static override fromPreset(
    config: TokenizerConfig,
    asset: TokenizerAsset,
    split: TokenizerSplit,
  ): Qwen3Tokenizer {
    return new Qwen3Tokenizer(bytePairPresetOptions(config, asset, split));
  }

  constructor(options: BytePairTokenizerOptions) {
    super(qwenOptions(options, ['<|im_end|>', '<|endoftext|>']), 'Qwen3Tokenizer');
    const eos = this.special('<|im_end|>');
    const pad = this.special('<|endoftext|>');
    this.endTokenId = eos;
    this.padTokenId = pad;
    this.stopTokenIds = [eos];
    this.specialTokenIds = sortedIds([eos, pad]);
  }
}
