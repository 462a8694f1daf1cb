/** The options Mistral's layers add to Llama's: the sliding window, the head size, rope scaling. */

/** Options of Mistral's attention and decoder beyond Llama's (keras-hub's, camelCase). */
export interface MistralOptions {
  /**
   * Keys more than `slidingWindow - 1` positions before a query are masked (keras-hub's banded
   * mask); null: none (full causal attention). Default 512.
   */
  slidingWindow?: number | null;
  /** The head size: null (the default), or the input width / numQueryHeads. */
  headDim?: number | null;
  /** The rotary embedding's position scaling: only 1 (the default) is implemented. */
  ropeScalingFactor?: number;
}

/** The options checked, keras-hub's defaults filled in (errors name the class and option). */
export function mistralOptions(args: MistralOptions, cls: string): Required<MistralOptions> {
  const window = args.slidingWindow === undefined ? 512 : args.slidingWindow;
  if (!(window === null || (Number.isInteger(window) && window > 0))) {
    throw new Error(
      `${cls}: expected slidingWindow to be a positive integer or null, received ` +
        `${JSON.stringify(window)}`,
    );
  }
  const headDim = args.headDim ?? null;
  if (!(headDim === null || (Number.isInteger(headDim) && headDim > 0))) {
    throw new Error(
      `${cls}: expected headDim to be a positive integer or null, received ` +
        `${JSON.stringify(headDim)}`,
    );
  }
  const factor = args.ropeScalingFactor ?? 1;
  if (factor !== 1) {
    throw new Error(
      `${cls}: ropeScalingFactor=${JSON.stringify(factor)} is not implemented (expected 1, ` +
        `keras-hub's default and every Mistral preset's)`,
    );
  }
  return {slidingWindow: window, headDim, ropeScalingFactor: factor};
}

/** A head size other than the width / heads, refused (a layer's build, or a config check). */
export function refuseHeadDim(
  headDim: number | null,
  hidden: number,
  heads: number,
): string | null {
  if (headDim == null || headDim === Math.floor(hidden / heads)) return null;
  return (
    `a head size other than hidden_dim / num_query_heads (${Math.floor(hidden / heads)}) is not ` +
    `implemented (received head_dim ${headDim})`
  );
}
