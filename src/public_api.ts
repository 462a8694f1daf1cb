/**
 * The package's public API shared by the Node entry (`index.ts`) and the browser bundle
 * (`browser.ts`): one export list. Node-only exports (files on disk, PNG output) are in index.ts.
 */
// the built-in keras-hub families' own layer classes, registered with tfjs' serialization
import './hub_models/register_layers';

export {MultiHeadAttention} from './layers/attention/multi_head_attention';
export type {MultiHeadAttentionArgs} from './layers/attention/multi_head_attention';
export {CachedMultiHeadAttention} from './layers/hub/cached_multi_head_attention';
export {GroupQueryAttention} from './layers/attention/group_query_attention';
export type {GroupQueryAttentionArgs} from './layers/attention/group_query_attention';
export {Attention, DotProductAttention} from './layers/attention/dot_product_attention';
export type {
  AttentionArgs,
  DotProductAttentionArgs,
  ScoreMode,
} from './layers/attention/dot_product_attention';
export {AdditiveAttention} from './layers/attention/additive_attention';
export type {AdditiveAttentionArgs} from './layers/attention/additive_attention';
export {EinsumDense} from './layers/core/einsum_dense';
export {TokenAndPositionEmbedding} from './layers/hub/token_and_position_embedding';
export {PositionEmbedding} from './layers/hub/position_embedding';
export type {PositionEmbeddingArgs} from './layers/hub/position_embedding';
export {ReversibleEmbedding} from './layers/hub/reversible_embedding';
export type {ReversibleEmbeddingArgs} from './layers/hub/reversible_embedding';
export {RotaryEmbedding} from './layers/hub/rotary_embedding';
export type {RotaryEmbeddingArgs} from './layers/hub/rotary_embedding';
export {SinePositionEncoding} from './layers/hub/sine_position_encoding';
export type {SinePositionEncodingArgs} from './layers/hub/sine_position_encoding';
export {TransformerEncoder} from './layers/hub/transformer_encoder';
export type {
  TransformerEncoderArgs,
  TransformerEncoderCallArgs,
} from './layers/hub/transformer_encoder';
export {TransformerDecoder} from './layers/hub/transformer_decoder';
export type {
  TransformerDecoderArgs,
  TransformerDecoderCallArgs,
} from './layers/hub/transformer_decoder';
export type {TransformerBlockArgs} from './layers/hub/transformer_block_args';
export {GetItem} from './layers/core/get_item';
export {GlobalAveragePooling1D} from './layers/core/global_average_pooling';
export type {GlobalAveragePooling1DArgs} from './layers/core/global_average_pooling';
export {quantize} from './layers/core/quantize_model';
export type {QuantizeOptions} from './layers/core/quantize_model';
export {int8Tensor, int8ValuesOf} from './ops/int8';
export {QuantizedDense} from './layers/core/quantized_dense';
export type {QuantizedDenseArgs} from './layers/core/quantized_dense';
export {QuantizedEmbedding} from './layers/core/quantized_embedding';
export type {QuantizedEmbeddingArgs} from './layers/core/quantized_embedding';
export type {GetItemArgs, IndexItem} from './layers/core/get_item';
export type {EinsumDenseArgs} from './layers/core/einsum_dense';
export type {TokenAndPositionEmbeddingArgs} from './layers/hub/token_and_position_embedding';
export {BaseAttention} from './layers/engine/base_attention';
export type {
  AnyTensor,
  AttentionCallArgs,
  AttentionOutput,
  BaseAttentionArgs,
  CacheCallArgs,
  CachedOutput,
  EagerCallArgs,
  EagerInputs,
  ScoresOption,
  SymbolicCallArgs,
  SymbolicInputs,
} from './layers/engine/base_attention';
export {layers} from './layers/factories';
export {contractOf, defineContract} from './layers/engine/contract';
export type {
  AttentionCall,
  CachedDecoding,
  ContractClass,
  ContractSpec,
  ImpliedSize,
  DecodingContract,
  IndexingCall,
  KeywordCall,
  PositionAwareDecoding,
  PositionsCall,
  PositionWiseDecoding,
  RefusedDecoding,
  TensorCall,
  GraphLayer,
  GraphNode,
  Json,
  JsonObject,
  Keras3Class,
  KerasCall,
  KerasContract,
  KerasContractSpec,
  LayerContract,
  NodeCheck,
  Refused,
  SublayerFolder,
  WeightContract,
} from './layers/engine/contract';

export {einsum} from './ops/einsum';
export {simdKernelsReady} from './kernels/wasm_kernels';
export {causalMask} from './ops/masking';
export {maskedSoftmax, sequenceMask} from './ops/masked_softmax';

export {generate} from './generate/generate';
export {cachedDecodingRefusal} from './generate/graph_plan';
export {registerStepRule} from './generate/step_rules';
export type {
  StepAttention,
  StepCompile,
  StepDecline,
  StepEmitter,
  StepInt8Weight,
  StepValue,
  StepWeight,
  StepWeightSource,
  StepRmsNormOptions,
} from './generate/step_program';
export type {StepActivation} from './kernels/step_kernels_api';
export type {GenerateOptions} from './generate/generate';
export type {CompiledRunReport, StepReport} from './generate/step_report';
export type {SamplerName, SamplerOptions} from './generate/samplers';
export type {SaveKerasFileOptions} from './interop/keras_file_save';
export {generateText} from './generate/generate_text';
export type {
  GenerateTextOptions,
  TextGenerator,
  TextPreprocessor,
  TextTokenizer,
} from './generate/generate_text';

export {convertKerasArtifacts} from './interop/keras';
export {toKerasArtifacts} from './interop/keras_export';
export {toKeras3Artifacts} from './interop/keras3_export';
export type {Keras3ExportOptions} from './interop/keras3_export';
export {loadTorchMultiheadAttention} from './interop/torch';
export type {TorchStateDict} from './interop/torch';

export {attentionHeatmapSvg} from './viz/heatmap';
export type {HeatmapInput, HeatmapOptions} from './viz/heatmap';

export {BytePairTokenizer, WordPieceTokenizer} from './tokenizers';
export type {
  BytePairTokenizerOptions,
  PresetTokenizerClass,
  Tokenizer,
  TokenizerAsset,
  TokenizerConfig,
  TokenizerSplit,
  WordPieceTokenizerOptions,
} from './tokenizers';
export {loadTokenizer, tokenizerFromPreset} from './interop/load_tokenizer';
export type {LoadTokenizerOptions} from './interop/load_tokenizer';
export {buildKerasHubModel} from './hub_models/build';
export {
  KERAS_HUB_FAMILIES,
  kerasHubClassNames,
  kerasHubFamilies,
  registerKerasHubFamily,
} from './hub_models/registry';
export {GPT2} from './hub_models/gpt2/gpt2_family';
export {GPT2Tokenizer} from './hub_models/gpt2/gpt2_tokenizer';
export {BERT} from './hub_models/bert/bert_family';
export {BertTokenizer} from './hub_models/bert/bert_tokenizer';
export {LLAMA3} from './hub_models/llama3/llama3_family';
export {Llama3Tokenizer} from './hub_models/llama3/llama3_tokenizer';
export type {Llama3TokenizerOptions} from './hub_models/llama3/llama3_tokenizer';
export {LlamaAttention} from './hub_models/llama3/llama_attention';
export type {LlamaAttentionArgs} from './hub_models/llama3/llama_attention';
export {LlamaTransformerDecoder} from './hub_models/llama3/llama_decoder';
export type {LlamaTransformerDecoderArgs} from './hub_models/llama3/llama_decoder';
export {LlamaLayerNorm} from './hub_models/llama3/llama_layer_norm';
export type {LlamaLayerNormArgs} from './hub_models/llama3/llama_layer_norm';
export type {
  BackboneGraph,
  HubWeightReader,
  HubWeights,
  HubWeightValue,
  KerasHubFamily,
  KerasHubLayerClass,
  KerasHubPreprocessorDefaults,
  TaskKind,
  WeightBinding,
  WeightTerm,
} from './hub_models/family';
export {configFloat, configInt, configRate} from './hub_models/family';
export {CompositeLayer} from './layers/engine/composite_layer';
export {
  loadKerasHubPreset,
  type KerasHubPreset,
  type KerasHubPreprocessor,
  type KerasHubPresetSource,
  type LoadKerasHubPresetOptions,
  type PresetFile,
} from './interop/keras_hub_preset';
export {releaseGenerateMemory} from './generate/kept_step_memory';
export {stepReportText} from './generate/step_report_text';
export type {ConfigReadFromWeights} from './hub_models/family';
export {SentencePieceTokenizer} from './tokenizers/sentence_piece';
export type {SentencePieceTokenizerOptions} from './tokenizers/sentence_piece';
export {sentencePiecePresetOptions} from './tokenizers/preset_tokenizer';
export {QWEN} from './hub_models/qwen/qwen_family';
export {QwenTokenizer, qwenSplitPattern} from './hub_models/qwen/qwen_tokenizer';
export {QwenAttention, qwenInverseFrequencies} from './hub_models/qwen/qwen_attention';
export type {QwenAttentionArgs} from './hub_models/qwen/qwen_attention';
export {QwenTransformerDecoder} from './hub_models/qwen/qwen_decoder';
export type {QwenTransformerDecoderArgs} from './hub_models/qwen/qwen_decoder';
export {QwenLayerNorm} from './hub_models/qwen/qwen_layer_norm';
export {QWEN3} from './hub_models/qwen3/qwen3_family';
export {Qwen3Tokenizer} from './hub_models/qwen3/qwen3_tokenizer';
export {Qwen3Attention} from './hub_models/qwen3/qwen3_attention';
export type {Qwen3AttentionArgs} from './hub_models/qwen3/qwen3_attention';
export {Qwen3TransformerDecoder} from './hub_models/qwen3/qwen3_decoder';
export type {Qwen3TransformerDecoderArgs} from './hub_models/qwen3/qwen3_decoder';
export {Qwen3LayerNorm} from './hub_models/qwen3/qwen3_layer_norm';
export {MISTRAL} from './hub_models/mistral/mistral_family';
export {MistralTokenizer} from './hub_models/mistral/mistral_tokenizer';
export {CachedMistralAttention} from './hub_models/mistral/mistral_attention';
export type {CachedMistralAttentionArgs} from './hub_models/mistral/mistral_attention';
export {MistralTransformerDecoder} from './hub_models/mistral/mistral_decoder';
export type {MistralTransformerDecoderArgs} from './hub_models/mistral/mistral_decoder';
export {MistralLayerNormalization} from './hub_models/mistral/mistral_layer_norm';
export type {MistralOptions} from './hub_models/mistral/mistral_options';
export {SMOLLM3} from './hub_models/smollm3/smollm3_family';
export {SmolLM3Tokenizer} from './hub_models/smollm3/smollm3_tokenizer';
export {SmolLM3Attention} from './hub_models/smollm3/smollm3_attention';
export type {SmolLM3AttentionArgs} from './hub_models/smollm3/smollm3_attention';
export {SmolLM3DecoderLayer} from './hub_models/smollm3/smollm3_decoder';
export type {SmolLM3DecoderLayerArgs} from './hub_models/smollm3/smollm3_decoder';
export {SmolLM3RotaryEmbedding} from './hub_models/smollm3/smollm3_rotary_embedding';
export type {SmolLM3RotaryEmbeddingArgs} from './hub_models/smollm3/smollm3_rotary_embedding';
export type {SmolLM3AttentionOptions} from './hub_models/smollm3/smollm3_options';
export {RMSNormalization} from './hub_models/smollm3/rms_normalization';
export type {RMSNormalizationArgs} from './hub_models/smollm3/rms_normalization';
export {CachedGemma3Attention} from './hub_models/gemma3/gemma3_attention';
export type {
  CachedGemma3AttentionArgs,
  Gemma3AttentionParts,
} from './hub_models/gemma3/gemma3_attention';
export {Gemma3DecoderBlock} from './hub_models/gemma3/gemma3_decoder_block';
export type {
  Gemma3BlockParts,
  Gemma3DecoderBlockArgs,
} from './hub_models/gemma3/gemma3_decoder_block';
export {Gemma3RMSNormalization} from './hub_models/gemma3/gemma3_rms_norm';
export type {Gemma3RMSNormalizationArgs} from './hub_models/gemma3/gemma3_rms_norm';
export {Gemma3EmbeddingScale} from './hub_models/gemma3/gemma3_embedding_scale';
export type {Gemma3EmbeddingScaleArgs} from './hub_models/gemma3/gemma3_embedding_scale';
export {Gemma3MeanPooling} from './hub_models/gemma3/gemma3_mean_pooling';
export {UnitNormalization} from './hub_models/gemma3/unit_normalization';
export {Gemma3Tokenizer} from './hub_models/gemma3/gemma3_tokenizer';
export type {Gemma3TokenizerOptions} from './hub_models/gemma3/gemma3_tokenizer';
export {embedText} from './hub_models/gemma3/embed_text';
export type {
  EmbedTextOptions,
  EmbedTextPreprocessor,
  EmbedTextTokenizer,
  TextEmbedderParts,
} from './hub_models/gemma3/embed_text';

export {DEFAULT_LORA_TARGETS, disableLora, enableLora, mergeLora} from './layers/core/lora_model';
export type {EnableLoraOptions} from './layers/core/lora_model';
export type {LoraLayer, LoraOptions, LoraWeightKind, LoraWeights} from './layers/core/lora';
export {Dense} from './layers/core/dense';
export {Embedding} from './layers/core/embedding';
export {loadLoraWeights, saveLoraWeights} from './interop/lora_weights_file';
export {kerasHubWeightsFile} from './interop/keras_hub_weights_file';
export {finetune} from './finetune/finetune';
export type {
  FinetuneOptions,
  FinetunePreset,
  FinetuneProgress,
  FinetuneResult,
} from './finetune/finetune';
export {KerasAdam} from './finetune/keras_adam';
export type {KerasAdamOptions, LearningRate} from './finetune/keras_adam';
export {causalLmLoss} from './finetune/causal_lm_loss';
export {packCausalLm, textExamples} from './finetune/causal_lm_batches';
export type {PackingPreprocessor, PackingTokenizer} from './finetune/causal_lm_batches';
export type {CausalLmBatch} from './finetune/train_step';
export type {ScheduleName} from './finetune/schedules';
