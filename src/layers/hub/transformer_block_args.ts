/** The options of keras-hub's TransformerEncoder / TransformerDecoder, and their checks. */
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';

import {
  getActivation,
  getInitializer,
  getRegularizer,
  Initializer,
  InitializerIdentifier,
  Regularizer,
  RegularizerIdentifier,
} from '../engine/config_objects';
import {TRANSFORMER_CONFIG_KEYS} from './hub_contract';
import {positiveNumber, refuseUnknownOptions} from './layer_options';

/** Options shared by {@link TransformerEncoder} and {@link TransformerDecoder} (keras-hub's arguments). */
export interface TransformerBlockArgs extends LayerArgs {
  /** Width of the feed-forward network's hidden layer. */
  intermediateDim: number;
  /** Attention heads; the head size is the input width / numHeads. */
  numHeads: number;
  /** Dropout of the attention weights, after attention and after the feed-forward. Default 0. */
  dropout?: number;
  /** The feed-forward activation: `'relu'` (default), `'gelu'` (exact, erf),
   * `'geluApproximate'` (keras-hub's tanh form, also spelled `'gelu_approximate'`), or any tfjs
   * activation name. */
  activation?: string;
  /** Layer normalization epsilon. Default 1e-5 (keras-hub's; Keras' own default is 1e-3). */
  layerNormEpsilon?: number;
  /** Initializer of every kernel. Default glorotUniform. */
  kernelInitializer?: InitializerIdentifier;
  /** Initializer of every bias. Default zeros. */
  biasInitializer?: InitializerIdentifier;
  /** Regularizer of every kernel. Default none. */
  kernelRegularizer?: RegularizerIdentifier | null;
  /** Regularizer of every bias. Default none. */
  biasRegularizer?: RegularizerIdentifier | null;
  /** Pre-norm `x + f(LN(x))` (GPT-2) when true; post-norm `LN(x + f(x))` (BERT) by default. */
  normalizeFirst?: boolean;
  /** Seeds the dropout masks (each call its own stream). */
  seed?: number | null;
  /** Roles of the inputs of a functional call with mask inputs (recorded; kept in the config). */
  inputRoles?: string[] | null;
}

/** keras-hub / Keras activation names that tfjs spells differently. */
const ACTIVATION_ALIASES: Record<string, string> = {
  gelu_approximate: 'geluApproximate',
  silu: 'swish',
};

/** The checked options, defaults filled in. */
export interface BlockOptions {
  intermediateDim: number;
  numHeads: number;
  dropout: number;
  activation: string;
  layerNormEpsilon: number;
  kernelInitializer: Initializer;
  biasInitializer: Initializer;
  kernelRegularizer: Regularizer | null;
  biasRegularizer: Regularizer | null;
  normalizeFirst: boolean;
  seed: number | null;
  inputRoles: string[] | null;
}

/** Checks `args` (errors name the option, what was expected and what arrived). */
export function blockOptions(
  args: TransformerBlockArgs,
  cls: string,
  extraKnown: readonly string[],
): BlockOptions {
  if (args == null) throw new Error(`${cls}: expected {intermediateDim, numHeads, ...}`);
  refuseUnknownOptions(args, [...TRANSFORMER_CONFIG_KEYS, ...extraKnown], cls);
  for (const key of ['intermediateDim', 'numHeads'] as const) {
    if (!(Number.isInteger(args[key]) && args[key] > 0)) {
      throw new Error(
        `${cls}: expected ${key} to be a positive integer, received ${JSON.stringify(args[key])}`,
      );
    }
  }
  const rate = args.dropout ?? 0;
  if (!(typeof rate === 'number' && rate >= 0 && rate < 1)) {
    throw new Error(
      `${cls}: expected dropout to be a number in [0, 1), received ${JSON.stringify(args.dropout)}`,
    );
  }
  const name = args.activation ?? 'relu';
  if (typeof name !== 'string') {
    throw new Error(
      `${cls}: expected activation to be a name such as 'relu' or 'gelu', received ${JSON.stringify(name)}`,
    );
  }
  const activation = ACTIVATION_ALIASES[name] ?? name;
  getActivation(activation); // fails now, not at build, on an unknown activation name
  return {
    intermediateDim: args.intermediateDim,
    numHeads: args.numHeads,
    dropout: rate,
    activation,
    layerNormEpsilon: positiveNumber(args.layerNormEpsilon, 'layerNormEpsilon', cls, 1e-5),
    kernelInitializer: getInitializer(args.kernelInitializer, 'glorotUniform'),
    biasInitializer: getInitializer(args.biasInitializer, 'zeros'),
    kernelRegularizer: getRegularizer(args.kernelRegularizer),
    biasRegularizer: getRegularizer(args.biasRegularizer),
    normalizeFirst: Boolean(args.normalizeFirst ?? false),
    seed: args.seed ?? null,
    inputRoles: args.inputRoles ?? null,
  };
}
