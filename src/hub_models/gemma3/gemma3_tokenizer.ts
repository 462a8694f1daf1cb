/** keras-hub's Gemma3Tokenizer (keras_hub/src/models/gemma3/gemma3_tokenizer.py): SentencePiece. */
import {SentencePieceTokenizer} from '../../tokenizers/sentence_piece';
import type {SentencePieceTokenizerOptions} from '../../tokenizers/sentence_piece';
import {sentencePiecePresetOptions} from '../../tokenizers/preset_tokenizer';
import type {TokenizerAsset, TokenizerConfig} from '../../tokenizers/preset_tokenizer';
import {sortedIds} from '../../tokenizers/tokenizer';

/** Options of {@link Gemma3Tokenizer}: keras-hub's arguments. */
export interface Gemma3TokenizerOptions extends SentencePieceTokenizerOptions {
  /** The image tokens `<img>`, `<start_of_image>`, `<end_of_image>` are special. Default true. */
  hasVisionTokens?: boolean;
}

/**
 * Gemma 3's tokenizer (keras-hub's Gemma3Tokenizer), a SentencePiece model: `<bos>` starts,
 * `<eos>` ends, `<pad>` pads; generation stops at `<eos>` and `<end_of_turn>` (Gemma3CausalLM's
 * `stop_token_ids="auto"`); generated text drops the special tokens
 * (`<bos>`, `<eos>`, `<pad>`, and with `hasVisionTokens` `<img>` and `<end_of_image>`:
 * keras-hub keeps `<start_of_image>`).
 *
 * @example
 * ```js
 * const tokenizer = await loadTokenizer('presets/gemma3'); // a keras-hub preset folder
 * tokenizer.decode(tokenizer.encode('Hello world')); // 'Hello world'
 * ```
 */
export class Gemma3Tokenizer extends SentencePieceTokenizer {
  static override get className(): string {
    return 'Gemma3Tokenizer';
  }
  /** The tokenizer of a preset's tokenizer.json (`add_bos`, `add_eos`, `has_vision_tokens`). */
  static override fromPreset<T extends SentencePieceTokenizer>(
    this: new (options: Gemma3TokenizerOptions) => T,
    config: TokenizerConfig,
    asset: TokenizerAsset,
  ): T {
    const vision = config.has_vision_tokens ?? true;
    if (typeof vision !== 'boolean') {
      throw new Error(
        `loadTokenizer: tokenizer.json's config.has_vision_tokens must be true or false, ` +
          `received ${JSON.stringify(vision)}.`,
      );
    }
    return new this({...sentencePiecePresetOptions(config, asset), hasVisionTokens: vision});
  }

  /** The `hasVisionTokens` option. */
  readonly hasVisionTokens: boolean;

  constructor(options: Gemma3TokenizerOptions) {
    super(options, 'Gemma3Tokenizer');
    this.hasVisionTokens = options.hasVisionTokens ?? true;
    this.startTokenId = this.special('<bos>');
    this.endTokenId = this.special('<eos>');
    this.padTokenId = this.special('<pad>');
    const specials = [this.startTokenId, this.endTokenId, this.padTokenId];
    if (this.hasVisionTokens) {
      // keras-hub's generate_postprocess keeps <start_of_image> (the user wrote it)
      this.special('<start_of_image>');
      specials.push(this.special('<img>'), this.special('<end_of_image>'));
    }
    this.specialTokenIds = sortedIds(specials);
    // keras-hub's token_to_id('<end_of_turn>'): the unknown id when the vocabulary lacks it
    const endOfTurn = this.tokenToId('<end_of_turn>') ?? this.unknownTokenId;
    this.stopTokenIds = sortedIds([this.endTokenId, endOfTurn]);
  }
}
