/** keras-hub's QwenTokenizer (keras_hub/src/models/qwen/qwen_tokenizer.py): byte-level BPE. */
import {BytePairTokenizer, splitPatternSource} from '../../tokenizers/byte_pair';
import type {BytePairTokenizerOptions, TokenizerSplit} from '../../tokenizers/byte_pair';
import {bytePairPresetOptions} from '../../tokenizers/preset_tokenizer';
import type {TokenizerAsset, TokenizerConfig} from '../../tokenizers/preset_tokenizer';
import {sortedIds} from '../../tokenizers/tokenizer';

/**
 * The source of Qwen 2's split regex (its tokenizer.json's pre-tokenizer, `u` flag): Llama 3's
 * with one digit per piece (`\p{N}` where Llama 3 has `\p{N}{1,3}`). The `model` split of the
 * Qwen tokenizers (Hugging Face's ids); keras-hub 0.32 splits with GPT-2's rules instead.
 */
export function qwenSplitPattern(): string {
  return splitPatternSource('llama3').replace('\\p{N}{1,3}', '\\p{N}');
}

/** Qwen's chat tokens, kept whole by Hugging Face's Qwen tokenizers (the `model` split). */
export const QWEN_CHAT_TOKENS: readonly string[] = ['<|im_start|>', '<|im_end|>'];

/**
 * The options of the Qwen tokenizers: keras-hub's special tokens kept whole (`specials`); the
 * `model` split is Qwen's regex unless one is given, and keeps Qwen's chat tokens of the
 * vocabulary whole too, as Hugging Face's Qwen tokenizers do (keras-hub 0.32 splits them).
 */
export function qwenOptions(
  options: BytePairTokenizerOptions,
  specials: readonly string[],
): BytePairTokenizerOptions {
  const split = options.split ?? (options.splitPattern !== undefined ? 'model' : 'keras-hub');
  let unsplittable = options.unsplittableTokens ?? specials;
  if (split === 'model') {
    const vocabulary = options.vocabulary;
    const has = (t: string) =>
      vocabulary instanceof Map
        ? vocabulary.has(t)
        : Object.prototype.hasOwnProperty.call(vocabulary, t);
    unsplittable = [...new Set([...unsplittable, ...QWEN_CHAT_TOKENS.filter(has)])];
  }
  return {
    ...options,
    split,
    splitPattern: options.splitPattern ?? qwenSplitPattern(),
    unsplittableTokens: unsplittable,
  };
}

/**
 * Qwen 2.5's tokenizer (keras-hub's QwenTokenizer): no start token, `<|endoftext|>` ends (and
 * stops generation) and is the one unsplittable special token keras-hub declares; padding id 0.
 * keras-hub 0.32 declares none of Qwen's chat tokens (`<|im_start|>`, `<|im_end|>`): they are
 * split and merged as text, as keras-hub does.
 *
 * @example
 * ```js
 * const tokenizer = await loadTokenizer('presets/qwen'); // a keras-hub preset folder
 * tokenizer.encode('Hello world<|endoftext|>');
 * ```
 */
export class QwenTokenizer extends BytePairTokenizer {
  static override get className(): string {
    return 'QwenTokenizer';
  }
  static override fromPreset(
    config: TokenizerConfig,
    asset: TokenizerAsset,
    split: TokenizerSplit,
  ): QwenTokenizer {
    return new QwenTokenizer(bytePairPresetOptions(config, asset, split));
  }

  constructor(options: BytePairTokenizerOptions) {
    super(qwenOptions(options, ['<|endoftext|>']), 'QwenTokenizer');
    const eos = this.special('<|endoftext|>');
    this.endTokenId = eos;
    this.padTokenId = 0;
    this.stopTokenIds = [eos];
    this.specialTokenIds = sortedIds([eos]);
  }
}
