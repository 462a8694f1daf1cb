/**
 * Resolving and serializing the objects a layer config refers to by name or by
 * `{className, config}`: initializers, regularizers, constraints and activations.
 *
 * tfjs-layers keeps its own `getInitializer` & co. internal, so this resolves names through the
 * public `tf.serialization` registry, accepting the spellings found in tfjs code
 * (`'glorotUniform'`), Keras code (`'glorot_uniform'`) and model.json (`{className: 'L2', ...}`).
 */
import * as tf from '@tensorflow/tfjs-core';
import type {Activation} from '@tensorflow/tfjs-layers/dist/activations';
import type {Constraint} from '@tensorflow/tfjs-layers/dist/constraints';
import type {Initializer} from '@tensorflow/tfjs-layers/dist/initializers';
import type {Regularizer} from '@tensorflow/tfjs-layers/dist/regularizers';
import {regularizers} from '@tensorflow/tfjs-layers';

export type {Activation, Constraint, Initializer, Regularizer};

/** A name such as `'glorotUniform'`, an instance, or a serialized `{className, config}`. */
export type InitializerIdentifier = string | Initializer | tf.serialization.ConfigDict;
export type RegularizerIdentifier = string | Regularizer | tf.serialization.ConfigDict;
export type ConstraintIdentifier = string | Constraint | tf.serialization.ConfigDict;
/** An activation name such as `'relu'` or `'gelu'`; null or `'linear'` for none. */
export type ActivationIdentifier = string;

type Kind = 'initializer' | 'regularizer' | 'constraint' | 'activation';

/** `use_causal_mask` -> `useCausalMask` (Python's spelling to tfjs'). */
export function camelCase(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function pascal(name: string): string {
  const c = camelCase(name);
  return c.charAt(0).toUpperCase() + c.slice(1);
}

/** Keras / tfjs class names that differ from the PascalCase of their identifier. */
const CLASS_ALIASES: Record<Kind, Record<string, string>> = {
  initializer: {LecunNormal: 'LeCunNormal', LecunUniform: 'LeCunUniform'},
  regularizer: {L1l2: 'L1L2'},
  constraint: {MaxNormConstraint: 'MaxNorm'},
  activation: {},
};

function registry(): Record<
  string,
  [
    tf.serialization.SerializableConstructor<tf.serialization.Serializable>,
    tf.serialization.FromConfigMethod<tf.serialization.Serializable>,
  ]
> {
  return tf.serialization.SerializationMap.getMap().classNameMap;
}

function fromClassName(
  kind: Kind,
  className: string,
  config: tf.serialization.ConfigDict,
): tf.serialization.Serializable {
  // Keras' L1 / L2 regularizers are tfjs L1L2 with one term.
  if (kind === 'regularizer' && (className === 'L1' || className === 'L2')) {
    const l1 = className === 'L1' ? Number(config.l1 ?? 0.01) : 0;
    const l2 = className === 'L2' ? Number(config.l2 ?? 0.01) : 0;
    return regularizers.l1l2({l1, l2});
  }
  const map = registry();
  const candidates =
    kind === 'activation'
      ? [className, camelCase(className)]
      : [className, pascal(className), CLASS_ALIASES[kind][pascal(className)] ?? ''];
  for (const name of candidates) {
    const entry = map[name];
    if (entry !== undefined) {
      const [cls, fromConfig] = entry;
      return fromConfig(cls, config);
    }
  }
  throw new Error(
    `Unknown ${kind}: '${className}'. Expected a class registered with tf.serialization (e.g. ${
      kind === 'initializer'
        ? "'glorotUniform', 'zeros'"
        : kind === 'regularizer'
          ? "'l1l2'"
          : kind === 'constraint'
            ? "'nonNeg', 'maxNorm'"
            : "'relu', 'gelu', 'linear'"
    }).`,
  );
}

function resolve(kind: Kind, identifier: unknown): tf.serialization.Serializable {
  if (identifier instanceof tf.serialization.Serializable) {
    return identifier;
  }
  if (typeof identifier === 'string') {
    return fromClassName(kind, identifier, {});
  }
  if (identifier != null && typeof identifier === 'object' && 'className' in identifier) {
    const dict = identifier as tf.serialization.ConfigDict;
    const config = (dict.config ?? {}) as tf.serialization.ConfigDict;
    return fromClassName(kind, String(dict.className), {...config});
  }
  throw new Error(
    `Invalid ${kind}: expected a name, an instance or {className, config}, received ${JSON.stringify(identifier)}`,
  );
}

export function getInitializer(
  identifier: InitializerIdentifier | undefined,
  fallback: string,
): Initializer {
  return resolve('initializer', identifier ?? fallback) as Initializer;
}

export function getRegularizer(
  identifier: RegularizerIdentifier | null | undefined,
): Regularizer | null {
  return identifier == null ? null : (resolve('regularizer', identifier) as Regularizer);
}

export function getConstraint(
  identifier: ConstraintIdentifier | null | undefined,
): Constraint | null {
  return identifier == null ? null : (resolve('constraint', identifier) as Constraint);
}

export function getActivation(identifier: ActivationIdentifier | null | undefined): Activation {
  return resolve('activation', identifier ?? 'linear') as Activation;
}

/** `{className, config}` of an initializer, regularizer or constraint; null stays null. */
export function serializeObject(
  obj: tf.serialization.Serializable | null,
): tf.serialization.ConfigDict | null {
  if (obj == null) {
    return null;
  }
  return {className: obj.getClassName(), config: obj.getConfig()};
}

/** Activations serialize as their name, as in tfjs-layers. */
export function serializeActivation(activation: Activation): string {
  return activation.getClassName();
}
