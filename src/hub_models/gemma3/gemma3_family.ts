/**
 * keras-hub's Gemma 3, text only (keras_hub/src/models/gemma3/, 0.32): `Gemma3Backbone` with no
 * vision encoder, `Gemma3CausalLM` and `Gemma3TextEmbedder`.
 *
 * Backbone: token ids -> `ReversibleEmbedding` (tied, its reverse soft-capped by
 * `final_logit_soft_cap`) -> times `sqrt(hidden_dim)` -> `num_layers` `Gemma3DecoderBlock`s
 * (with `use_sliding_window_attention`, blocks `i % 6 < 5` are local: a sliding window of
 * `sliding_window_size`, rope base 10000 and `local_rope_scaling_factor`; the others global: rope
 * base 1e6 and `global_rope_scaling_factor`) -> `RMSNormalization`: `sequence_output
 * [b, T, hidden_dim]`. An embedding backbone (`is_embedding_model`) adds `pooled_output
 * [b, embedding_dim]`: the mean over the padding mask, two Dense projections without bias
 * (`pooling_intermediate_dim`, `embedding_dim`) and a unit norm; a `Gemma3TextEmbedder` returns
 * it. Refused: a vision encoder, a dtype other than float32.
 */
import * as tf from '@tensorflow/tfjs-layers';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';

import {ReversibleEmbedding} from '../../layers/hub/reversible_embedding';
import type {Json, JsonObject} from '../../layers/engine/contract';
import {configFloat, configInt, configRate, KerasHubFamily, WeightTerm} from '../family';
import {Gemma3DecoderBlock} from './gemma3_decoder_block';
import {Gemma3EmbeddingScale} from './gemma3_embedding_scale';
import {GEMMA3_LAYERS} from './gemma3_layers';
import {Gemma3MeanPooling} from './gemma3_mean_pooling';
import {Gemma3RMSNormalization} from './gemma3_rms_norm';
import {GEMMA3_STEP_RULES} from './gemma3_step_rules';
import {Gemma3Tokenizer} from './gemma3_tokenizer';
import {UnitNormalization} from './unit_normalization';
import {Dense} from '../../layers/core/dense';

const CLS = 'Gemma3Backbone';

/** keras-hub's rope bases of Gemma 3's local and global layers (Gemma3Backbone's constants). */
export const GEMMA3_LOCAL_ROPE_BASE = 10_000;
/** The global layers' rope base. */
export const GEMMA3_GLOBAL_ROPE_BASE = 1_000_000;

/** Whether block `i` is a local (sliding-window) layer: keras-hub's 5 local, 1 global. */
export function gemma3IsLocal(i: number, useSlidingWindow: boolean): boolean {
  return useSlidingWindow && i % 6 < 5;
}

const flag = (config: JsonObject, key: string, fallback: boolean): boolean => {
  const v = config[key];
  if (v == null) return fallback;
  if (typeof v !== 'boolean') {
    throw new Error(
      `${CLS}: expected config ${key} to be true or false, received ${JSON.stringify(v)}`,
    );
  }
  return v;
};

const cap = (config: JsonObject, key: string): number | null =>
  config[key] == null ? null : configFloat(config, key, CLS, 0);

/** The config's options, checked (keras-hub's defaults where it has them). */
function options(config: JsonObject) {
  const embedding = flag(config, 'is_embedding_model', false);
  return {
    vocab: configInt(config, 'vocabulary_size', CLS),
    numLayers: configInt(config, 'num_layers', CLS),
    numQueryHeads: configInt(config, 'num_query_heads', CLS),
    numKeyValueHeads: configInt(config, 'num_key_value_heads', CLS),
    hidden: configInt(config, 'hidden_dim', CLS),
    intermediate: configInt(config, 'intermediate_dim', CLS),
    headDim: configInt(config, 'head_dim', CLS),
    queryHeadDimNormalize: flag(config, 'query_head_dim_normalize', true),
    useQueryKeyNorm: flag(config, 'use_query_key_norm', true),
    usePostFfwNorm: flag(config, 'use_post_ffw_norm', false),
    usePostAttentionNorm: flag(config, 'use_post_attention_norm', false),
    attentionSoftCap: cap(config, 'attention_logit_soft_cap'),
    finalSoftCap: cap(config, 'final_logit_soft_cap'),
    slidingWindow: flag(config, 'use_sliding_window_attention', false),
    windowSize:
      config.sliding_window_size == null ? 1024 : configInt(config, 'sliding_window_size', CLS),
    localScaling: configFloat(config, 'local_rope_scaling_factor', CLS, 1),
    globalScaling: configFloat(config, 'global_rope_scaling_factor', CLS, 1),
    bidirectional: flag(config, 'use_bidirectional_attention', false),
    epsilon: configFloat(config, 'layer_norm_epsilon', CLS, 1e-6),
    dropout: configRate(config, 'dropout', CLS, 0),
    embedding,
    poolingDim: embedding ? configInt(config, 'pooling_intermediate_dim', CLS) : 0,
    embeddingDim: embedding ? configInt(config, 'embedding_dim', CLS) : 0,
  };
}

const positiveOrNull = (v: Json) =>
  v == null || (typeof v === 'number' && v > 0) ? null : 'expected a number > 0 or null';

/** keras-hub's Gemma 3 family, text only: `Gemma3Backbone`, `Gemma3CausalLM`, `Gemma3TextEmbedder`. */
export const GEMMA3: KerasHubFamily = {
  name: 'Gemma 3',
  backbone: CLS,
  tasks: {Gemma3CausalLM: 'causalLM', Gemma3TextEmbedder: 'textEmbedder'},
  inputs: ['token_ids', 'padding_mask'],
  outputs: ['sequence_output', 'pooled_output'],
  configKeys: [
    'vocabulary_size',
    'image_size',
    'num_layers',
    'num_query_heads',
    'num_key_value_heads',
    'hidden_dim',
    'intermediate_dim',
    'head_dim',
    'query_head_dim_normalize',
    'use_query_key_norm',
    'use_post_ffw_norm',
    'use_post_attention_norm',
    'attention_logit_soft_cap',
    'final_logit_soft_cap',
    'use_sliding_window_attention',
    'sliding_window_size',
    'local_rope_scaling_factor',
    'global_rope_scaling_factor',
    'vision_encoder',
    'use_bidirectional_attention',
    'layer_norm_epsilon',
    'dropout',
    'is_embedding_model',
    'pooling_intermediate_dim',
    'embedding_dim',
  ],
  requiredKeys: [
    'vocabulary_size',
    'num_layers',
    'num_query_heads',
    'num_key_value_heads',
    'hidden_dim',
    'intermediate_dim',
    'head_dim',
  ],
  refuse: {
    vision_encoder: (v) =>
      v == null ? null : 'only the text-only Gemma 3 (vision_encoder null) is implemented',
    attention_logit_soft_cap: positiveOrNull,
    final_logit_soft_cap: positiveOrNull,
    local_rope_scaling_factor: positiveOrNull,
    global_rope_scaling_factor: positiveOrNull,
  },
  layers: GEMMA3_LAYERS,
  tokenizer: Gemma3Tokenizer,
  preprocessor: {addStartToken: true, addEndToken: true},
  stepRules: GEMMA3_STEP_RULES,
  weightTerms(config: JsonObject): WeightTerm[] {
    const o = options(config);
    const attention = o.hidden * o.headDim * (2 * o.numQueryHeads + 2 * o.numKeyValueHeads);
    return [
      {
        keys: {vocabulary_size: o.vocab, hidden_dim: o.hidden},
        what: 'a token embedding',
        values: o.vocab * o.hidden,
      },
      {
        keys: {
          num_layers: o.numLayers,
          hidden_dim: o.hidden,
          head_dim: o.headDim,
          intermediate_dim: o.intermediate,
        },
        what: "the blocks' attention and feed-forward kernels",
        values: o.numLayers * (attention + 3 * o.hidden * o.intermediate),
      },
      {
        keys: {pooling_intermediate_dim: o.poolingDim, embedding_dim: o.embeddingDim},
        what: "the embedding head's projections",
        values: o.poolingDim * (o.hidden + o.embeddingDim),
      },
    ];
  },
  build(config: JsonObject) {
    const o = options(config);
    // every layer is checked by its constructor before any weight exists
    const blocks = Array.from({length: o.numLayers}, (_, i) => {
      const local = gemma3IsLocal(i, o.slidingWindow);
      return new Gemma3DecoderBlock({
        name: `decoder_block_${i}`,
        hiddenDim: o.hidden,
        intermediateDim: o.intermediate,
        headDim: o.headDim,
        numQueryHeads: o.numQueryHeads,
        numKeyValueHeads: o.numKeyValueHeads,
        queryHeadDimNormalize: o.queryHeadDimNormalize,
        useQueryKeyNorm: o.useQueryKeyNorm,
        usePostFfwNorm: o.usePostFfwNorm,
        usePostAttentionNorm: o.usePostAttentionNorm,
        gateDimReduction: 1,
        logitSoftCap: o.attentionSoftCap,
        useSlidingWindowAttention: local,
        slidingWindowSize: o.windowSize,
        ropeWavelength: local ? GEMMA3_LOCAL_ROPE_BASE : GEMMA3_GLOBAL_ROPE_BASE,
        ropeScalingFactor: local ? o.localScaling : o.globalScaling,
        useBidirectionalAttention: o.bidirectional,
        layerNormEpsilon: o.epsilon,
        dropout: o.dropout,
      });
    });
    const tokenIds = tf.input({shape: [null], dtype: 'int32', name: 'token_ids'});
    const paddingMask = tf.input({shape: [null], dtype: 'int32', name: 'padding_mask'});
    const tokenEmbedding = new ReversibleEmbedding({
      name: 'token_embedding',
      inputDim: o.vocab,
      outputDim: o.hidden,
      tieWeights: true,
      logitSoftCap: o.finalSoftCap,
      embeddingsInitializer: 'zeros',
    });
    const embedded = tokenEmbedding.apply(tokenIds) as SymbolicTensor;
    // keras-hub: ops.cast(ops.sqrt(hidden_dim), dtype), a float32 factor
    const scale = new Gemma3EmbeddingScale({
      name: 'embedding_scale',
      factor: Math.fround(Math.sqrt(o.hidden)),
    });
    let x = scale.apply(embedded) as SymbolicTensor;
    for (const block of blocks) x = block.apply(x, {paddingMask});
    const norm = new Gemma3RMSNormalization({name: 'final_normalization', epsilon: o.epsilon});
    const sequenceOutput = norm.apply(x) as SymbolicTensor;
    const outputs: Record<string, SymbolicTensor> = {sequence_output: sequenceOutput};
    if (o.embedding) {
      const pooled = new Gemma3MeanPooling({name: 'mean_pooling'}).apply([
        sequenceOutput,
        paddingMask,
      ]) as SymbolicTensor;
      const dense = (name: string, units: number) =>
        new Dense({name, units, useBias: false, kernelInitializer: 'zeros'});
      const projected = dense('embedding_projection', o.embeddingDim).apply(
        dense('pooling_dense_1', o.poolingDim).apply(pooled),
      ) as SymbolicTensor;
      outputs.pooled_output = new UnitNormalization({name: 'unit_normalization'}).apply(
        projected,
      ) as SymbolicTensor;
    }
    return {inputs: [tokenIds, paddingMask], outputs, tokenEmbedding};
  },
};
