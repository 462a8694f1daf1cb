/** keras-hub's Gemma3Tokenizer (keras_hub/src/models/gemma3/gemma3_tokenizer.py): SentencePiece. */
import type {TokenizerAsset, TokenizerConfig} from '../../tokenizers/preset_tokenizer';
import type {Tokenizer} from '../../tokenizers/tokenizer';

/**
 * The class name and assets of keras-hub's Gemma3Tokenizer (a SentencePiece model,
 * `vocabulary.spm`); reading it is not implemented yet: loading a preset's tokenizer says so.
 */
export class Gemma3Tokenizer {
  /** keras-hub's class name. */
  static readonly className = 'Gemma3Tokenizer';
  /** The files it reads from the preset's assets. */
  static readonly fileAssets: readonly string[] = ['vocabulary.spm'];
  /** Refused: the SentencePiece reader is not implemented yet. */
  static fromPreset(_config: TokenizerConfig, _asset: TokenizerAsset): Tokenizer {
    throw new Error(
      'loadTokenizer: Gemma3Tokenizer (SentencePiece, vocabulary.spm) is not implemented yet; ' +
        'expected a byte-level BPE or WordPiece tokenizer',
    );
  }
}
