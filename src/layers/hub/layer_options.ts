/** Option checks shared by the keras-hub layers. */
import {camelCase} from '../engine/config_objects';
import {LAYER_KEYS} from '../engine/constructor_args';

/**
 * Throws on an option this package does not implement (a keras-hub option such as YaRN rope or
 * llama-3.1 frequency factors) when it is set to anything but null / false, naming it.
 */
export function refuseUnknownOptions(args: object, known: readonly string[], cls: string): void {
  for (const [key, value] of Object.entries(args ?? {})) {
    if (known.includes(key) || LAYER_KEYS.includes(key) || value == null || value === false)
      continue;
    const camel = camelCase(key);
    if (camel !== key && known.includes(camel)) {
      throw new Error(
        `${cls}: unknown option '${key}'; did you mean '${camel}'? (options are camelCase)`,
      );
    }
    throw new Error(
      `${cls}: the option '${key}' = ${JSON.stringify(value)} is not implemented; the options are ` +
        `${known.join(', ')}`,
    );
  }
}

/** A number option: finite and > 0 (or >= 0 when `zero`), else an error naming it. */
export function positiveNumber(
  value: unknown,
  name: string,
  cls: string,
  fallback: number,
): number {
  const v = value ?? fallback;
  if (!(typeof v === 'number' && Number.isFinite(v) && v > 0)) {
    throw new Error(
      `${cls}: expected ${name} to be a number > 0, received ${JSON.stringify(value)}`,
    );
  }
  return v;
}

/** A whole number >= 0 (a position), default 0. */
export function startIndexOption(value: unknown, cls: string): number {
  const v = value ?? 0;
  if (!(typeof v === 'number' && Number.isInteger(v) && v >= 0)) {
    throw new Error(
      `${cls}: expected startIndex to be a whole number >= 0, received ${JSON.stringify(value)}`,
    );
  }
  return v;
}
