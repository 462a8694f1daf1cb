/** keras-hub's tokenizers: byte-level BPE (GPT-2, Llama 3) and WordPiece (BERT). */
export type {Tokenizer} from './tokenizer';
export {BytePairTokenizer, GPT2Tokenizer, Llama3Tokenizer, splitPatternSource} from './byte_pair';
export type {
  BytePairTokenizerOptions,
  Llama3TokenizerOptions,
  SplitPatternName,
  TokenizerSplit,
} from './byte_pair';
export {BertTokenizer, WordPieceTokenizer} from './word_piece';
export type {WordPieceTokenizerOptions} from './word_piece';
export {loadTokenizer, tokenizerFromPreset} from './load';
export type {LoadTokenizerOptions} from './load';
