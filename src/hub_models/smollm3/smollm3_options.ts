/** The options keras-hub's SmolLM3 layers share (SmolLM3Attention, SmolLM3DecoderLayer). */

/** keras-hub's SmolLM3 attention options (camelCase). */
export interface SmolLM3AttentionOptions {
  /** The model's width. */
  hiddenSize: number;
  /** Query heads (head size hiddenSize / numAttentionHeads). */
  numAttentionHeads: number;
  /** Key / value heads (numAttentionHeads a multiple of it). */
  numKeyValueHeads: number;
  /** Biases on the query, key and value projections: only false is implemented. Default false. */
  attentionBias?: boolean;
  /** keras-hub keeps it in the config and applies no dropout. Default 0. */
  attentionDropout?: number;
  /** Whether each layer rotates its queries and keys (a layer past its end does). */
  ropeLayerEnabledList: readonly boolean[];
  /** keras-hub keeps each layer's type (`full_attention`) in the config; unused. */
  layerTypes: readonly string[];
  /** This layer's index in the model (its entry of ropeLayerEnabledList). */
  layerIdx: number;
  /** keras-hub keeps it in the config; unused. Default 2048. */
  maxPositionEmbeddings?: number;
  /** The rotary base. Default 10000. */
  ropeTheta?: number;
  /** Only 1 is implemented. Default 1. */
  partialRotaryFactor?: number;
}

/** The option keys of {@link SmolLM3AttentionOptions}, in keras-hub's order. */
export const SMOLLM3_ATTENTION_KEYS = [
  'hiddenSize',
  'numAttentionHeads',
  'numKeyValueHeads',
  'attentionBias',
  'attentionDropout',
  'ropeLayerEnabledList',
  'layerTypes',
  'layerIdx',
  'maxPositionEmbeddings',
  'ropeTheta',
  'partialRotaryFactor',
] as const;

/** The options checked, keras-hub's defaults filled in (errors name the class and option). */
export function smolLM3Options(
  args: SmolLM3AttentionOptions,
  cls: string,
): Required<SmolLM3AttentionOptions> {
  if (args == null) throw new Error(`${cls}: expected {hiddenSize, numAttentionHeads, ...}`);
  for (const key of ['hiddenSize', 'numAttentionHeads', 'numKeyValueHeads'] as const) {
    if (!(Number.isInteger(args[key]) && args[key] > 0)) {
      throw new Error(
        `${cls}: expected ${key} to be a positive integer, received ${JSON.stringify(args[key])}`,
      );
    }
  }
  if (!(Number.isInteger(args.layerIdx) && args.layerIdx >= 0)) {
    throw new Error(
      `${cls}: expected layerIdx to be an integer >= 0, received ${JSON.stringify(args.layerIdx)}`,
    );
  }
  const list = args.ropeLayerEnabledList;
  if (!Array.isArray(list) || list.some((v) => typeof v !== 'boolean')) {
    throw new Error(
      `${cls}: expected ropeLayerEnabledList to be a list of booleans, received ` +
        `${JSON.stringify(list)}`,
    );
  }
  const types = args.layerTypes;
  if (!Array.isArray(types) || args.layerIdx >= types.length) {
    throw new Error(
      `${cls}: expected layerTypes to be a list with an entry for layer ${args.layerIdx}, ` +
        `received ${JSON.stringify(types)}`,
    );
  }
  if ((args.attentionBias ?? false) !== false) {
    throw new Error(
      `${cls}: attentionBias=${JSON.stringify(args.attentionBias)} is not implemented ` +
        `(expected false, every SmolLM3 preset's)`,
    );
  }
  if ((args.partialRotaryFactor ?? 1) !== 1) {
    throw new Error(
      `${cls}: partialRotaryFactor=${JSON.stringify(args.partialRotaryFactor)} is not ` +
        `implemented (expected 1, keras-hub's rotation needs the whole head)`,
    );
  }
  return {
    hiddenSize: args.hiddenSize,
    numAttentionHeads: args.numAttentionHeads,
    numKeyValueHeads: args.numKeyValueHeads,
    attentionBias: false,
    attentionDropout: args.attentionDropout ?? 0,
    ropeLayerEnabledList: [...list],
    layerTypes: [...types],
    layerIdx: args.layerIdx,
    maxPositionEmbeddings: args.maxPositionEmbeddings ?? 2048,
    ropeTheta: args.ropeTheta ?? 10000,
    partialRotaryFactor: 1,
  };
}

/** keras-hub's `use_rope` of a layer: its entry of the list, true past its end. */
export function usesRope(o: Required<SmolLM3AttentionOptions>): boolean {
  return o.layerIdx < o.ropeLayerEnabledList.length ? o.ropeLayerEnabledList[o.layerIdx] : true;
}
