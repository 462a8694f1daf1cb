/** keras-hub's Llama3Tokenizer (keras_hub/src/models/llama3/llama3_tokenizer.py): byte-level BPE. */
import {BytePairTokenizer} from '../../tokenizers/byte_pair';
import type {BytePairTokenizerOptions, TokenizerSplit} from '../../tokenizers/byte_pair';
import {bytePairPresetOptions} from '../../tokenizers/preset_tokenizer';
import type {TokenizerAsset, TokenizerConfig} from '../../tokenizers/preset_tokenizer';
import {sortedIds} from '../../tokenizers/tokenizer';

/** Options of {@link Llama3Tokenizer}: keras-hub's arguments. */
export interface Llama3TokenizerOptions extends BytePairTokenizerOptions {
  /** Default `<|begin_of_text|>`. */
  bosToken?: string;
  /** Default `<|end_of_text|>`. */
  eosToken?: string;
  /** Default `<|start_header_id|>`, `<|end_header_id|>`. */
  miscSpecialTokens?: readonly string[];
}

/**
 * Llama 3's tokenizer (keras-hub's Llama3Tokenizer): `<|begin_of_text|>` starts,
 * `<|end_of_text|>` ends (and `<|eot_id|>` with it), all of them and the header tokens unsplittable.
 *
 * @example
 * ```js
 * const tokenizer = await loadTokenizer('presets/llama3'); // a keras-hub preset folder
 * tokenizer.encode('<|begin_of_text|>Hi!<|eot_id|>');
 * ```
 */
export class Llama3Tokenizer extends BytePairTokenizer {
  static override get className(): string {
    return 'Llama3Tokenizer';
  }
  static override fromPreset(
    config: TokenizerConfig,
    asset: TokenizerAsset,
    split: TokenizerSplit,
  ): Llama3Tokenizer {
    return new Llama3Tokenizer(bytePairPresetOptions(config, asset, split));
  }

  /** keras-hub's special tokens of this tokenizer, in its order. */
  readonly specialTokens: readonly string[];

  constructor(options: Llama3TokenizerOptions) {
    const specials = llama3Specials(options);
    super(
      {...options, unsplittableTokens: options.unsplittableTokens ?? specials},
      'Llama3Tokenizer',
      'llama3',
    );
    this.specialTokens = specials;
    for (const token of specials) this.special(token);
    this.startTokenId = this.special(options.bosToken ?? '<|begin_of_text|>');
    this.endTokenId = this.special(options.eosToken ?? '<|end_of_text|>');
    this.padTokenId = 0;
    // keras-hub adds <|eot_id|> as end_token2 when the end token is <|end_of_text|>; generate
    // stops at both, and its postprocessing strips every special token (pad 0 is not one).
    const stops = [this.endTokenId];
    if ((options.eosToken ?? '<|end_of_text|>') === '<|end_of_text|>') {
      stops.push(this.special('<|eot_id|>'));
    }
    this.stopTokenIds = sortedIds(stops);
    this.specialTokenIds = sortedIds(specials.map((t) => this.special(t)));
  }
}

function llama3Specials(options: Llama3TokenizerOptions): string[] {
  const bos = options.bosToken ?? '<|begin_of_text|>';
  const eos = options.eosToken ?? '<|end_of_text|>';
  const misc = (options.miscSpecialTokens ?? ['<|start_header_id|>', '<|end_header_id|>']).filter(
    (t) => t !== bos && t !== eos,
  );
  const specials = [bos, eos, ...misc];
  if (eos === '<|end_of_text|>') specials.push('<|eot_id|>');
  return [...new Set(specials)];
}
