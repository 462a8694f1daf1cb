/** keras-hub's Llama rotary embedding options: Llama 3.1's frequency smoothing, its refusals. */
import {camelCase} from '../../layers/engine/config_objects';
import {snakeCase} from '../../layers/engine/contract';
import type {JsonObject} from '../../layers/engine/contract';

/** keras-hub's Llama 3.1 rope options: frequency smoothing, all four set or none. */
export const LLAMA31_ROPE = [
  'ropeFrequencyAdjustmentFactor',
  'ropeLowFreqFactor',
  'ropeHighFreqFactor',
  'ropePretrainingSequenceLength',
] as const;

/** Llama 3.1's rope frequency smoothing (keras-hub's LlamaRotaryEmbedding), or all null. */
export interface LlamaRopeSmoothing {
  /** Long wavelengths' frequencies are divided by it. */
  ropeFrequencyAdjustmentFactor?: number | null;
  /** Wavelengths above `ropePretrainingSequenceLength / ropeLowFreqFactor` are adjusted. */
  ropeLowFreqFactor?: number | null;
  /** Wavelengths below `ropePretrainingSequenceLength / ropeHighFreqFactor` are kept. */
  ropeHighFreqFactor?: number | null;
  /** The context length of pretraining. */
  ropePretrainingSequenceLength?: number | null;
}

/** The smoothing options checked: all four positive numbers (high > low), or all null. */
export function ropeSmoothing(args: LlamaRopeSmoothing, cls: string): Required<LlamaRopeSmoothing> {
  const values = LLAMA31_ROPE.map((k) => args[k] ?? null);
  if (values.every((v) => v == null)) {
    return {
      ropeFrequencyAdjustmentFactor: null,
      ropeLowFreqFactor: null,
      ropeHighFreqFactor: null,
      ropePretrainingSequenceLength: null,
    };
  }
  const [factor, low, high, length] = values;
  const ok =
    values.every((v) => typeof v === 'number' && Number.isFinite(v) && v > 0) &&
    (high as number) > (low as number);
  if (!ok) {
    throw new Error(
      `${cls}: expected ${LLAMA31_ROPE.join(', ')} all null or all positive numbers with ` +
        `ropeHighFreqFactor > ropeLowFreqFactor (keras-hub sets them together), received ` +
        LLAMA31_ROPE.map((k, i) => `${k}=${JSON.stringify(values[i])}`).join(', '),
    );
  }
  return {
    ropeFrequencyAdjustmentFactor: factor,
    ropeLowFreqFactor: low,
    ropeHighFreqFactor: high,
    ropePretrainingSequenceLength: length,
  };
}

/**
 * keras-hub's rotary inverse frequencies for head size `H` (LlamaRotaryEmbedding's
 * `_get_inverse_freq`): `wavelength^(-2i/H)`, with Llama 3.1's smoothing when set.
 */
export function llamaInverseFrequencies(
  H: number,
  wavelength: number,
  rope: Required<LlamaRopeSmoothing>,
): number[] {
  return Array.from({length: H / 2}, (_, i) => {
    let inv = Math.fround(1 / Math.fround(Math.pow(wavelength, Math.fround((2 * i) / H))));
    if (rope.ropeLowFreqFactor == null) return inv;
    const factor = rope.ropeFrequencyAdjustmentFactor as number;
    const low = rope.ropeLowFreqFactor;
    const high = rope.ropeHighFreqFactor as number;
    const length = rope.ropePretrainingSequenceLength as number;
    const wavelen = (2 * Math.PI) / inv;
    if (wavelen > length / low) inv = inv / factor;
    const smooth = (length / wavelen - low) / (high - low);
    const smoothed = (1 - smooth) * (inv / factor) + smooth * inv;
    if (wavelen >= length / high && wavelen <= length / low) inv = smoothed;
    return Math.fround(inv);
  });
}

/** Why a rope option's value is refused, or null (camelCase or snake_case key). */
export function refuseLlamaRope(key: string, value: unknown): string | null {
  const camel = camelCase(key);
  if (camel === 'ropePositionScalingFactor' && value != null && value !== 1) {
    return 'keras-hub 0.32 ignores it in LlamaRotaryEmbedding; only 1 is accepted';
  }
  return null;
}

/** A Keras config's refused rope options (camelCased: contract.ts), as one reason, or null. */
export function refuseRopeConfig(c: JsonObject): string | null {
  for (const [k, v] of Object.entries(c)) {
    const why = refuseLlamaRope(k, v);
    if (why != null) return `has ${snakeCase(k)} = ${JSON.stringify(v)}: ${why}`;
  }
  return null;
}
