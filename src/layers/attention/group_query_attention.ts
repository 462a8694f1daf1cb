import * as tf from '@tensorflow/tfjs-core';

import {ScoresOption} from '../engine/base_attention';
import {AttentionParts} from '../engine/call_spec';
import {projectionConfig} from '../core/projection_options';
import {formatShape, Shape} from '../engine/shapes';
import {configNumber, defineContract, largestOption, LayerContract} from '../engine/contract';
import {multiHeadDecoding} from '../engine/decoding_checks';
import {
  ATTENTION_CONFIG_KEYS,
  PROJECTION_CONFIG_KEYS,
  PROJECTION_KERAS3_KEYS,
} from './attention_contract';
import {
  HeadCounts,
  MultiHeadArgs,
  MultiHeadBase,
  positiveInt,
  Projection,
  ProjectionName,
  SublayerTable,
} from './multi_head_base';
import {checkConstructorArgs} from '../engine/constructor_args';

/** GroupQueryAttention's constructor options. */
export interface GroupQueryAttentionArgs extends MultiHeadArgs {
  /** Size of each attention head (query, key and value). */
  headDim: number;
  /** Number of query heads `U`. */
  numQueryHeads: number;
  /** Number of key / value heads `V`; `U` must be a multiple of it (1: multi-query attention). */
  numKeyValueHeads: number;
  /** Biases in the projections. Default true. */
  useBias?: boolean;
  /** Gated attention: the heads' output times `sigmoid(gate(query))` before the output projection. */
  useGate?: boolean;
  /** Local attention: only keys with `|i - j| < slidingWindow` (and `j <= i` if causal). */
  slidingWindow?: number | null;
  /** Keras' flash-attention switch: accepted for configs, the results are the same here. */
  flashAttention?: boolean | null;
}

/** The sublayers in Keras' build order (the weight order), with Keras 3's attribute names. */
export const GQA_SUBLAYERS: SublayerTable = [
  {name: 'query', keras3: '_query_dense', torch: null},
  {name: 'key', keras3: '_key_dense', torch: null},
  {name: 'value', keras3: '_value_dense', torch: null},
  {name: 'gate', keras3: '_gate_dense', torch: null},
  {name: 'attention_output', keras3: '_output_dense', torch: null},
];

/**
 * Grouped-query attention with Keras 3 semantics and weight layout
 * (`keras.layers.GroupQueryAttention`): `U` query heads share `V` key / value heads; query head
 * `u` uses key / value head `floor(u * V / U)` (the attention core groups query heads over
 * the shared key / value heads: keys and values are not copied per query head).
 *
 * - Inputs: `query [batch, T, dim]`, `value [batch, S, dimV]`, optional `key [batch, S, dimK]`;
 *   masks and lengths as for every attention layer.
 * - Output: `[batch, T, dim]`; with `returnAttentionScores` also the weights `[batch, U, T, S]`.
 * - Weights: `query/kernel [dim, U, headDim]`, `key/kernel [dimK, V, headDim]`,
 *   `value/kernel [dimV, V, headDim]`, (`gate/kernel [dim, U, headDim]`),
 *   `attention_output/kernel [U, headDim, dim]`, each with a bias when `useBias`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {GroupQueryAttention} from 'tfjs-attention';
 *
 * const gqa = new GroupQueryAttention({headDim: 16, numQueryHeads: 8, numKeyValueHeads: 2});
 * const x = tf.randomNormal([2, 6, 32]);
 * const y = gqa.apply(x, {useCausalMask: true}); // [2, 6, 32]
 * ```
 */
export class GroupQueryAttention<S extends boolean = false> extends MultiHeadBase<S> {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'GroupQueryAttention';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        keys: [
          'head_dim',
          'num_query_heads',
          'num_key_value_heads',
          'dropout',
          'use_bias',
          'seed',
          // Keras 3.15 has both (keras/src/layers/attention/grouped_query_attention.py)
          'use_gate',
          'sliding_window',
        ].concat(PROJECTION_KERAS3_KEYS),
        // the Python class is GroupedQueryAttention, which names its weight folder
        pathPrefix: 'grouped_query_attention',
      },
      keras2: {
        refused:
          'tf-keras 2 does not have (Keras 3 does); use MultiHeadAttention for a model that ' +
          'tf-keras must load',
      },
      call: {kind: 'attention', byKeyword: true},
    },
    configKeys: [
      ...ATTENTION_CONFIG_KEYS,
      'headDim',
      'numQueryHeads',
      'numKeyValueHeads',
      'useBias',
      'flashAttention',
      ...PROJECTION_CONFIG_KEYS,
      'useGate',
      'slidingWindow',
    ],
    weights: {
      sublayers: GQA_SUBLAYERS,
      implied: (c) => ({
        values:
          configNumber(c, 'headDim') *
          2 *
          (configNumber(c, 'numQueryHeads') + configNumber(c, 'numKeyValueHeads')),
        option: largestOption(c, ['headDim', 'numQueryHeads', 'numKeyValueHeads']),
      }),
    },
    decoding: {
      ...multiHeadDecoding(
        (c) => c.numKeyValueHeads as number,
        (c) => c.headDim as number,
      ),
    },
  });

  /** The `headDim` option: the size of each head. */
  readonly headDim: number;
  /** The `numQueryHeads` option. */
  readonly numQueryHeads: number;
  /** The `numKeyValueHeads` option. */
  readonly numKeyValueHeads: number;
  /** The `flashAttention` option (kept for Keras configs; no effect). */
  readonly flashAttention: boolean | null;

  constructor(args: GroupQueryAttentionArgs & ScoresOption<S>) {
    const name = 'GroupQueryAttention';
    checkConstructorArgs(name, args);
    super(args, name, '{headDim, numQueryHeads, numKeyValueHeads, ...}');
    this.headDim = positiveInt(args.headDim, 'headDim', false, name) as number;
    this.numQueryHeads = positiveInt(args.numQueryHeads, 'numQueryHeads', false, name) as number;
    this.numKeyValueHeads = positiveInt(
      args.numKeyValueHeads,
      'numKeyValueHeads',
      false,
      name,
    ) as number;
    if (this.numQueryHeads % this.numKeyValueHeads !== 0) {
      throw new Error(
        `GroupQueryAttention: expected numQueryHeads to be a multiple of numKeyValueHeads, ` +
          `received numQueryHeads ${this.numQueryHeads} and numKeyValueHeads ${this.numKeyValueHeads}`,
      );
    }
    this.flashAttention = args.flashAttention ?? null;
  }

  protected override sublayerTable(): SublayerTable {
    return GQA_SUBLAYERS;
  }

  protected override heads(): HeadCounts {
    const {numQueryHeads, numKeyValueHeads, headDim} = this;
    return {query: numQueryHeads, keyValue: numKeyValueHeads, keyDim: headDim, valueDim: headDim};
  }

  /** The output keeps the query's shape (its last dimension may be unknown here). */
  protected override outputDims(query: Shape): Shape {
    return [query[query.length - 1]];
  }

  /**
   * Keras' `compute_output_shape`: the query and the value of the same width (the output has the
   * query's shape). Keras checks it on symbolic calls only, and so does this layer.
   */
  protected override checkOutputShapeInputs({query, value}: AttentionParts<Shape>): void {
    const [q, v] = [query[query.length - 1], value[value.length - 1]];
    if (q != null && v != null && q !== v) {
      throw new Error(
        `Layer '${this.name}' (GroupQueryAttention): the last dimension of the query and the ` +
          `value must be equal, but are ${q} and ${v}; received query ${formatShape(query)} ` +
          `and value ${formatShape(value)}`,
      );
    }
  }

  /** Query, value and key of rank 3 (`[batch, length, features]`). */
  protected override checkRanks({query, value, key}: {query: Shape; value: Shape; key: Shape}) {
    for (const [role, shape] of Object.entries({query, value, key})) {
      if (shape.length !== 3) {
        throw new Error(
          `Layer '${this.name}': expected a ${role} of rank 3 ([batch, length, features]), ` +
            `received ${formatShape(shape)}`,
        );
      }
    }
  }

  /** Keras' equations and bias axes (`b` batch, `q` / `k` positions, `u` / `v` heads, `m` features). */
  protected override projections({query, value, key}: AttentionParts<Shape>) {
    const [U, V, H] = [this.numQueryHeads, this.numKeyValueHeads, this.headDim];
    const dim = query[2];
    if (dim == null) {
      throw new Error(`Layer '${this.name}': the query's last dimension must be known`);
    }
    const plans: Record<ProjectionName, Projection> = {
      query: {equation: 'bqm,muh->bquh', biasAxes: 'uh', outputShape: [null, U, H], input: query},
      key: {equation: 'bkm,mvh->bkvh', biasAxes: 'vh', outputShape: [null, V, H], input: key},
      value: {equation: 'bkm,mvh->bkvh', biasAxes: 'vh', outputShape: [null, V, H], input: value},
      gate: {equation: 'bqm,muh->bquh', biasAxes: 'uh', outputShape: [null, U, H], input: query},
      attention_output: {
        equation: 'bquh,uhm->bqm',
        biasAxes: 'm',
        outputShape: [null, dim],
        input: [null, null, U, H],
      },
    };
    return plans;
  }

  /** The layer's options, for serialization (tfjs' `getConfig`). */
  override getConfig(): tf.serialization.ConfigDict {
    const config: tf.serialization.ConfigDict = {
      headDim: this.headDim,
      numQueryHeads: this.numQueryHeads,
      numKeyValueHeads: this.numKeyValueHeads,
      useBias: this.useBias,
      flashAttention: this.flashAttention,
      ...projectionConfig(this.projection),
    };
    if (this.useGate) config.useGate = true;
    if (this.slidingWindow != null) config.slidingWindow = this.slidingWindow;
    return {...super.getConfig(), ...config};
  }
}
