/** keras-hub's generic tokenizers: byte-level BPE and WordPiece (the families' own are in hub_models/). */
export type {Tokenizer} from './tokenizer';
export {BytePairTokenizer, splitPatternSource} from './byte_pair';
export type {BytePairTokenizerOptions, SplitPatternName, TokenizerSplit} from './byte_pair';
export {WordPieceTokenizer} from './word_piece';
export type {WordPieceTokenizerOptions} from './word_piece';
export type {PresetTokenizerClass, TokenizerAsset, TokenizerConfig} from './preset_tokenizer';
export {SentencePieceTokenizer} from './sentence_piece';
export type {SentencePieceTokenizerOptions} from './sentence_piece';
