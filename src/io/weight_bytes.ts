/** The bytes a weights manifest declares, from each entry's dtype, shape and quantization. */
import type * as tf from '@tensorflow/tfjs-core';

const BYTES: Record<string, number> = {
  float32: 4,
  int32: 4,
  bool: 1,
  uint8: 1,
  uint16: 2,
  float16: 2,
};

/** Bytes of one manifest entry; throws on a shape or dtype the manifest should not hold. */
export function entryBytes(spec: tf.io.WeightsManifestEntry): number {
  const shape = spec?.shape;
  if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0)) {
    throw new Error(
      `fileSystem: weight '${spec?.name}' has an invalid shape ${JSON.stringify(shape)}`,
    );
  }
  const dtype = spec.quantization?.dtype ?? spec.dtype;
  const size = BYTES[dtype as string];
  if (size === undefined) {
    throw new Error(
      `fileSystem: weight '${spec.name}' has an unsupported dtype ${JSON.stringify(dtype)}`,
    );
  }
  return shape.reduce((p, d) => p * d, 1) * size;
}

/**
 * The weights' elements declared by a list of manifest entries, an upper bound of the values
 * they hold: an entry of bytes (`bool`: Keras' int8 datasets) counts twice, as it may hold int4
 * values two to a byte. Throws on a name listed twice (tfjs would silently load the last entry
 * of that name).
 */
export function declaredElements(specs: tf.io.WeightsManifestEntry[]): number {
  const names = new Set<string>();
  for (const s of specs) {
    if (names.has(s.name)) {
      throw new Error(
        `loading a model: the weights manifest lists the weight '${s.name}' more than once; ` +
          'expected each weight name once',
      );
    }
    names.add(s.name);
  }
  return specs.reduce(
    (n, s) => n + (s.shape ?? []).reduce((p, d) => p * d, 1) * (s.dtype === 'bool' ? 2 : 1),
    0,
  );
}
