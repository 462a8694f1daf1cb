/**
 * JSON from untrusted files, parsed only after its size and nesting depth are checked.
 *
 * `JSON.parse` recurses once per nesting level and builds every value before anything can look
 * at it: 66 MB of `[[[...]]]` took 5.3 GB and 43 s, and a 3.8 KB config nesting 200,000 objects
 * overflowed the stack with a bare "Maximum call stack size exceeded". The depth is found by one
 * linear scan of the text (strings skipped) before `JSON.parse` runs.
 */

/** The limits of one JSON file. */
export interface JsonLimits {
  /** The most UTF-16 code units of text (about bytes for the ASCII of a config). */
  maxChars: number;
  /** The deepest nesting of `[` and `{` allowed. */
  maxDepth: number;
}

/**
 * The deepest nesting of arrays and objects in `text`, stopping as soon as it passes `limit`
 * (then the value returned is `limit + 1`). Brackets inside strings (escapes included) are not
 * counted. Linear in the length of the text, no recursion.
 */
export function jsonDepth(text: string, limit = Infinity): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      depth++;
      if (depth > deepest) {
        deepest = depth;
        if (deepest > limit) return deepest;
      }
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

/**
 * Parses `text` as JSON after checking its length and depth against `limits`. Errors name
 * `what` (the file), the limit and what arrived; a syntax error keeps `JSON.parse`'s message.
 * Each error is thrown as `${owner}: ...`.
 */
export function parseBoundedJson(
  text: string,
  what: string,
  limits: JsonLimits,
  owner: string,
): unknown {
  if (text.length > limits.maxChars) {
    throw new Error(
      `${owner}: ${what} holds ${text.length} characters of JSON; at most ${limits.maxChars} ` +
        `are read (real files of this kind are far smaller).`,
    );
  }
  const depth = jsonDepth(text, limits.maxDepth);
  if (depth > limits.maxDepth) {
    throw new Error(
      `${owner}: ${what} nests arrays / objects more than ${limits.maxDepth} deep; ` +
        `expected at most ${limits.maxDepth} levels.`,
    );
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new Error(`${owner}: ${what} is not valid JSON (${syntaxReason(e as Error)}).`);
  }
}

/**
 * `JSON.parse`'s reason without the text it quotes: V8 writes `Unexpected token 'F', "FOREIGN-SE"...
 * is not valid JSON`, and the file may be a response from elsewhere (a redirected URL) whose bytes
 * must not reach a message. Reasons that give a position keep it.
 */
function syntaxReason(e: Error): string {
  return e.message.replace(/^Unexpected token .*is not valid JSON$/s, 'an unexpected character');
}

/**
 * The limits of a model's JSON files: a Keras `config.json`, `metadata.json`, keras-hub's
 * `task.json` / `preprocessor.json` / `tokenizer.json`, a tf-keras 2 `.h5` file's `model_config`
 * attribute, a tfjs `model.json`.
 *
 * Measured with Keras 3.15 (`serialize_keras_object(model)` as `.keras` files hold it,
 * `weights=None`): the largest `keras.applications` configs are NASNetLarge (1,033,360
 * characters), EfficientNetV2L (964,219), InceptionResNetV2 (728,573), DenseNet201 (669,350) and
 * ResNet152V2 (523,394), all 10 or 11 levels deep. 8 MiB is eight times the largest; 256 levels
 * leave room for dozens of functional models nested inside each other (each adds 3 levels).
 */
export const CONFIG_JSON_LIMITS: JsonLimits = {maxChars: 8 * 2 ** 20, maxDepth: 256};

/**
 * The limits of a weights manifest (Keras 3's sharded `model.weights.json`: a flat map of weight
 * path -> shard file): at 100 characters a weight, 16 MiB names over 160,000 weights; the map is
 * a few levels deep.
 */
export const WEIGHTS_MANIFEST_JSON_LIMITS: JsonLimits = {maxChars: 16 * 2 ** 20, maxDepth: 16};
