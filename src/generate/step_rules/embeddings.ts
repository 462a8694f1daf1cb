/**
 * The compile rules of keras-hub's embedding layers for the compiled decoding step
 * (generate/step_program.ts): TokenAndPositionEmbedding, PositionEmbedding and
 * ReversibleEmbedding (float32 and Keras 3's int8).
 */
import type {LayerVariable} from '@tensorflow/tfjs-layers';

import {StepActivation} from '../../kernels/step_kernels_api';
import type {PositionEmbedding} from '../../layers/hub/position_embedding';
import type {ReversibleEmbedding} from '../../layers/hub/reversible_embedding';
import type {TokenAndPositionEmbedding} from '../../layers/hub/token_and_position_embedding';
import type {StepCompile, StepInt8Weight, StepWeight} from '../step_program';
import {compileInt4Lookup} from './int8_layers';

/** TokenAndPositionEmbedding: the token rows at the ids plus the position rows. */
export const compileTokenAndPositionEmbedding: StepCompile = (layer, [ids], emit) => {
  const e = layer as TokenAndPositionEmbedding;
  if (e.tokenEmbeddings == null || e.positionEmbeddings == null) {
    return {declined: 'it is not built'};
  }
  const tokens = emit.weight(e.tokenEmbeddings);
  const positions = emit.weight(e.positionEmbeddings);
  if ('declined' in tokens) return tokens;
  if ('declined' in positions) return positions;
  const rows = emit.gather(ids, tokens, e.embeddingDim);
  const offset = (e as {startIndex?: number}).startIndex ?? 0;
  return [emit.positions(rows, positions, e.embeddingDim, offset, true)];
};

/** PositionEmbedding: the table's rows at the positions, broadcast over the batch. */
export const compilePositionEmbedding: StepCompile = (layer, [x], emit) => {
  const e = layer as PositionEmbedding;
  if (e.embeddings == null) return {declined: 'it is not built'};
  const table = emit.weight(e.embeddings);
  if ('declined' in table) return table;
  return [emit.positions(x, table, x.width, e.startIndex, false)];
};

/**
 * ReversibleEmbedding: ids: the lookup; hidden states (reverse): the tied logits x · tableᵀ, or
 * x · reverse_embeddings (int8: Keras' int8 lookup and products, the table's scale per row, the
 * reverse's per column).
 */
export const compileReversibleEmbedding: StepCompile = (layer, [x], emit) => {
  const e = layer as ReversibleEmbedding;
  if (e.embeddings == null) return {declined: 'it is not built'};
  const [int4] = e.int4Weights();
  if (int4 != null) {
    if (x.dtype === 'int32') return compileInt4Lookup(int4, x, emit);
    if (e.logitSoftCap != null) return {declined: 'a logit soft cap does not compile'};
    if (e.reverseEmbeddings != null) return {declined: 'untied int4 reverse embeddings'};
    if (!e.int4ReverseInputQuantization) {
      return {declined: 'int4 tied logits without their inputs quantized to int8'};
    }
    const table = emit.int4Weight(int4);
    return 'declined' in table ? table : [emit.denseTInt4(x, table, e.inputDim)];
  }
  const scale = e.embeddingsScale;
  if (x.dtype === 'int32') {
    const table = scale == null ? emit.weight(e.embeddings) : emit.int8Weight(e.embeddings, scale);
    if ('declined' in table) return table;
    return [
      scale == null
        ? emit.gather(x, table as StepWeight, e.outputDim)
        : emit.gatherInt8(x, table as StepInt8Weight, e.outputDim),
    ];
  }
  if (e.logitSoftCap != null) return {declined: 'a logit soft cap does not compile'};
  if (scale != null) {
    const reverse = e.reverseEmbeddings;
    const reverseScale = e.reverseEmbeddingsScale;
    if (reverse != null && reverseScale == null) {
      return {declined: 'its int8 reverse_embeddings have no scale (not built)'};
    }
    const w =
      reverse == null
        ? emit.int8Weight(e.embeddings, scale)
        : emit.int8Weight(reverse, reverseScale as LayerVariable);
    if ('declined' in w) return w;
    return [
      reverse == null
        ? emit.denseTInt8(x, w, e.inputDim)
        : emit.denseInt8(x, w, null, e.inputDim, StepActivation.None),
    ];
  }
  const untied = e.reverseEmbeddings;
  const w = emit.weight(untied ?? e.embeddings);
  if ('declined' in w) return w;
  return [
    untied == null
      ? emit.denseT(x, w, e.inputDim)
      : emit.dense(x, w, null, e.inputDim, StepActivation.None),
  ];
};
