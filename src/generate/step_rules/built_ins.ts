/**
 * The package's compile rules for the compiled decoding step, by the class name tfjs serializes:
 * the package's layers (`PACKAGE_RULES`) and tfjs' own built-in layers (`TFJS_RULES`, used for a
 * class of that name that declares no contract of its own). Model families and users add theirs
 * with `registerStepRule` (step_rules.ts).
 */
import type {StepCompile} from '../step_program';
import {
  compileReversibleEmbedding,
  compilePositionEmbedding,
  compileTokenAndPositionEmbedding,
} from './embeddings';
import {compileQuantizedDense, compileQuantizedEmbedding} from './int8_layers';
import {compileGroupQueryAttention, compileMultiHeadAttention} from './multi_head';
import {
  compileActivation,
  compileDense,
  compileEmbedding,
  compileIdentity,
  compileLayerNorm,
  compileMerge,
} from './tfjs_layers';
import {compileTransformerDecoder} from './transformer_decoder';

/** The package's own layer classes. */
export const PACKAGE_RULES: Readonly<Record<string, StepCompile>> = {
  MultiHeadAttention: compileMultiHeadAttention,
  CachedMultiHeadAttention: compileMultiHeadAttention,
  GroupQueryAttention: compileGroupQueryAttention,
  TransformerDecoder: compileTransformerDecoder,
  TokenAndPositionEmbedding: compileTokenAndPositionEmbedding,
  PositionEmbedding: compilePositionEmbedding,
  ReversibleEmbedding: compileReversibleEmbedding,
  QuantizedDense: compileQuantizedDense,
  QuantizedEmbedding: compileQuantizedEmbedding,
};

/** tfjs' built-in layers (they carry no contract). */
export const TFJS_RULES: Readonly<Record<string, StepCompile>> = {
  Dense: compileDense,
  LayerNormalization: compileLayerNorm,
  Dropout: compileIdentity,
  SpatialDropout1D: compileIdentity,
  GaussianNoise: compileIdentity,
  GaussianDropout: compileIdentity,
  AlphaDropout: compileIdentity,
  Activation: compileActivation,
  Add: compileMerge('add'),
  Multiply: compileMerge('mul'),
  Embedding: compileEmbedding,
};
