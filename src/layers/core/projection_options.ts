/**
 * The weight options of every layer made of einsum projections (EinsumDense, and the projections
 * of MultiHeadAttention and GroupQueryAttention): initializers, regularizers and constraints of
 * kernels and biases, resolved and validated once, and written back to configs the same way.
 */
import type * as tf from '@tensorflow/tfjs-core';

import {
  Constraint,
  ConstraintIdentifier,
  getConstraint,
  getInitializer,
  getRegularizer,
  Initializer,
  InitializerIdentifier,
  Regularizer,
  RegularizerIdentifier,
  serializeObject,
} from '../engine/config_objects';
import {snakeCase} from '../engine/contract';

export interface ProjectionArgs {
  /** Initializer of the kernels. Default glorotUniform (seeded by the layer's `seed`, if any). */
  kernelInitializer?: InitializerIdentifier;
  /** Initializer of the biases. Default zeros. */
  biasInitializer?: InitializerIdentifier;
  /** Regularizer of the kernels. Default none. */
  kernelRegularizer?: RegularizerIdentifier | null;
  /** Regularizer of the biases. Default none. */
  biasRegularizer?: RegularizerIdentifier | null;
  /** Not supported by tfjs-layers; only null is accepted. */
  activityRegularizer?: RegularizerIdentifier | null;
  /** Constraint on the kernels. Default none. */
  kernelConstraint?: ConstraintIdentifier | null;
  /** Constraint on the biases. Default none. */
  biasConstraint?: ConstraintIdentifier | null;
}

export interface ProjectionOptions {
  kernelInitializer: Initializer;
  biasInitializer: Initializer;
  kernelRegularizer: Regularizer | null;
  biasRegularizer: Regularizer | null;
  kernelConstraint: Constraint | null;
  biasConstraint: Constraint | null;
  /** Whether the kernel initializer is the default (so a layer seed may seed it). */
  defaultKernels: boolean;
}

/** Resolves the options; `cls` names the layer class in errors. */
export function projectionOptions(args: ProjectionArgs, cls: string): ProjectionOptions {
  if (args.activityRegularizer != null) {
    throw new Error(
      `${cls}: activityRegularizer is not supported (tfjs-layers' Layer.apply refuses activity ` +
        `regularizers); received ${JSON.stringify(args.activityRegularizer)}`,
    );
  }
  return {
    kernelInitializer: getInitializer(args.kernelInitializer, 'glorotUniform'),
    biasInitializer: getInitializer(args.biasInitializer, 'zeros'),
    kernelRegularizer: getRegularizer(args.kernelRegularizer),
    biasRegularizer: getRegularizer(args.biasRegularizer),
    kernelConstraint: getConstraint(args.kernelConstraint),
    biasConstraint: getConstraint(args.biasConstraint),
    defaultKernels: args.kernelInitializer == null,
  };
}

/** The options as config entries (Keras' keys, camelCased). */
export function projectionConfig(o: ProjectionOptions): tf.serialization.ConfigDict {
  return {
    kernelInitializer: serializeObject(o.kernelInitializer),
    biasInitializer: serializeObject(o.biasInitializer),
    kernelRegularizer: serializeObject(o.kernelRegularizer),
    biasRegularizer: serializeObject(o.biasRegularizer),
    activityRegularizer: null,
    kernelConstraint: serializeObject(o.kernelConstraint),
    biasConstraint: serializeObject(o.biasConstraint),
  };
}

/** The config keys of a projection's initializers, regularizers and constraints (camelCase). */
export const PROJECTION_CONFIG_KEYS: readonly string[] = [
  'kernelInitializer',
  'biasInitializer',
  'kernelRegularizer',
  'biasRegularizer',
  'activityRegularizer',
  'kernelConstraint',
  'biasConstraint',
];

/** The Keras 3 config keys of a projection's initializers, regularizers and constraints. */
export const PROJECTION_KERAS3_KEYS: readonly string[] = PROJECTION_CONFIG_KEYS.map(snakeCase);
