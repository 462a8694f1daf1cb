/**
 * Text in, text out with a keras-hub causal LM, as keras-hub 0.32's `CausalLM.generate(prompts,
 * max_length)` does with its preprocessor (keras_hub/src/models/causal_lm.py and
 * causal_lm_preprocessor.py): each prompt tokenized, packed as `[start token] + ids` (no end
 * token: generation continues the prompt), truncated to `maxLength`, right-padded with the pad
 * id; generation stops a row at the tokenizer's stop tokens (`stop_token_ids="auto"`: the end
 * token, and Llama 3's second end token `<|eot_id|>`); the output keeps each row up to and
 * including its stop token, drops the tokenizer's special tokens (`generate_postprocess`:
 * `special_token_ids`, e.g. Llama 3's `<|start_header_id|>`), and is detokenized, prompt included.
 */
import type {LayersModel} from '@tensorflow/tfjs-layers';

import {generate} from './generate';
import {checkMaxLength, checkMemory, checkOptionNames, checkSeed} from './generate_checks';
import type {GenerateOptions} from './generate';
import {checkModelInputs} from './model_inputs';
import {checkSampler} from './samplers';
import type {SamplerOptions} from './samplers';

/** What {@link generateText} needs of a tokenizer (the package's tokenizers have it). */
export interface TextTokenizer {
  /** Token ids of a text, no start or end token added. */
  encode(text: string): number[];
  /** The text of token ids (keras-hub's `detokenize`). */
  decode(ids: number[]): string;
  /** The start token keras-hub's packer puts first (`add_start_token`). */
  startTokenId?: number;
  /** The end token (the stop token when `stopTokenIds` is absent). */
  endTokenId?: number;
  /** The padding id of packed prompts. Default 0 (keras-hub's GPT-2 and Llama 3). */
  padTokenId?: number;
  /**
   * The ids a row stops at (keras-hub's `stop_token_ids="auto"`: the end token, and Llama 3's
   * `<|eot_id|>`, its `end_token2_id`). Absent: `[endTokenId]`.
   */
  stopTokenIds?: readonly number[];
  /**
   * The ids dropped from the output text (keras-hub's `special_token_ids`, e.g. Llama 3's
   * `<|start_header_id|>`). Absent: the start, end and pad ids.
   */
  specialTokenIds?: readonly number[];
  /**
   * The number of entries of the vocabulary: when given, it must equal the model's vocabulary
   * (its logits' last axis), checked before anything is generated.
   */
  vocabularySize?: number;
}

/** keras-hub's CausalLM preprocessor settings (its preprocessor.json). */
export interface TextPreprocessor {
  /** The packed length, and `maxLength`'s default. */
  sequenceLength: number;
  /** Whether the start token is put before each prompt. */
  addStartToken: boolean;
  /** Whether the packer adds an end token: never while generating (kept for the config's sake). */
  addEndToken?: boolean;
}

/** Options of {@link generateText}. */
export interface GenerateTextOptions extends SamplerOptions {
  /** Total tokens per row, prompt and start token included; default the preprocessor's length. */
  maxLength?: number;
  /** Seed of the samplers that draw at random. */
  seed?: number;
  /** Return the generated text alone, without the prompt (keras-hub's `strip_prompt`). */
  stripPrompt?: boolean;
  /**
   * Called as each token is chosen, with its row, its id and the text it completes (possibly
   * empty: a byte-level token may end inside a character, whose text then comes with a later
   * token; special tokens have none). The pieces of a row add up to its returned continuation,
   * a final U+FFFD (generation ended inside a character) included.
   */
  onToken?: (row: number, id: number, text: string) => void;
  /** As {@link GenerateOptions}. */
  useCache?: boolean;
  /** As {@link GenerateOptions}. */
  onFallback?: (reason: string) => void;
  /** As {@link GenerateOptions}. */
  onCompile?: GenerateOptions['onCompile'];
  /** As {@link GenerateOptions}. */
  memoryLimit?: number;
}

/** Every option {@link generateText} accepts (the keys of GenerateTextOptions). */
export const GENERATE_TEXT_OPTIONS = [
  'maxLength',
  'seed',
  'stripPrompt',
  'onToken',
  'useCache',
  'onFallback',
  'memoryLimit',
  'sampler',
  'k',
  'p',
  'temperature',
  'onCompile',
] as const;

// a type error here when an option is added to GenerateTextOptions and not to the list, or back
type SameKeys<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const optionsListed: SameKeys<keyof GenerateTextOptions, (typeof GENERATE_TEXT_OPTIONS)[number]> =
  true;
void optionsListed;

/** A causal LM with its tokenizer and preprocessor settings (what `loadKerasHubPreset` gives). */
export interface TextGenerator {
  /** token ids (and a padding mask) -> logits `[batch, T, vocab]`. */
  model: LayersModel;
  /** Its tokenizer (null, as `loadKerasHubPreset` gives for a preset without one, is an error). */
  tokenizer: TextTokenizer | null;
  /** Its preprocessor's settings (null is an error, as for the tokenizer). */
  preprocessor: TextPreprocessor | null;
}

function fail(message: string): never {
  throw new Error(`generateText: ${message}`);
}

/**
 * Throws unless the tokenizer fits the model: its vocabulary size (when it says) equals the
 * model's, and the ids generateText feeds or stops at lie in the model's vocabulary.
 */
function checkTokenizerFits(
  tokenizer: TextTokenizer,
  vocab: number | null,
  ids: {start: number | undefined; padId: number; stops: readonly unknown[]; stopName: string},
): void {
  const size = tokenizer.vocabularySize;
  if (vocab != null && size != null && size !== vocab) {
    fail(
      `the tokenizer does not fit the model: expected a tokenizer of the model's vocabulary ` +
        `size ${vocab} (its logits' last axis), received one of vocabularySize ${size}`,
    );
  }
  const named: Array<[string, unknown]> = [
    ['startTokenId', ids.start],
    ['padTokenId', ids.padId],
    ...ids.stops.map((id, i): [string, unknown] => [
      ids.stopName === 'endTokenId' ? 'endTokenId' : `stopTokenIds[${i}]`,
      id,
    ]),
  ];
  for (const [name, id] of named) {
    if (name === 'startTokenId' && id === undefined) continue;
    const top = vocab ?? 2 ** 31 - 1;
    if (!(Number.isInteger(id) && (id as number) >= 0 && (id as number) < top)) {
      fail(
        `the tokenizer does not fit the model: expected its ${name} to be a token id in ` +
          `[0, ${top}) (the model's vocabulary), received ${String(id)}`,
      );
    }
  }
}

/**
 * The text `decode(ids)` adds to `before`, held back while it ends inside a character, unless
 * this is the row's `last` token (then the U+FFFD the returned text ends with is streamed too).
 */
function completed(text: string, before: string, last: boolean): string {
  if (!text.startsWith(before)) return text; // a decode that rewrote earlier text (rare)
  const added = text.slice(before.length);
  return added.endsWith('\uFFFD') && !last ? '' : added;
}

/**
 * Generates text for each prompt, as keras-hub's `CausalLM.generate(prompts, max_length)` does
 * with the model compiled with `sampler="greedy"` (greedy is the default here; keras-hub's own
 * default sampler is top-k; the other samplers of {@link generate} are options).
 *
 * ```js
 * const [text] = await generateText(preset, 'The quick brown fox', {maxLength: 32});
 * await generateText(preset, ['a', 'b'], {onToken: (row, id, text) => process.stdout.write(text)});
 * ```
 *
 * @returns one string per prompt: the prompt and its continuation (or the continuation alone
 *   with `stripPrompt`), special tokens removed.
 */
export async function generateText(
  preset: TextGenerator,
  prompts: string | string[],
  options: GenerateTextOptions = {},
): Promise<string[]> {
  const {model, tokenizer, preprocessor} = preset ?? ({} as TextGenerator);
  if (model == null || tokenizer == null || preprocessor == null) {
    const missing = Object.entries({model, tokenizer, preprocessor}).filter(([, v]) => v == null);
    fail(
      'expected {model, tokenizer, preprocessor}, as loadKerasHubPreset returns for a preset ' +
        `saved with its preprocessor; received none for ${missing.map(([k]) => k).join(', ')}`,
    );
  }
  checkOptionNames(options, GENERATE_TEXT_OPTIONS, 'generateText');
  checkSampler(options, 'generateText');
  checkSeed(options.seed, 'generateText');
  const texts = typeof prompts === 'string' ? [prompts] : prompts;
  if (!Array.isArray(texts) || texts.length === 0 || !texts.every((t) => typeof t === 'string')) {
    fail(`expected a prompt string or a non-empty array of strings, received ${typeof prompts}`);
  }
  const vocab = checkModelInputs(model, 'generateText');
  const maxLength = options.maxLength ?? preprocessor.sequenceLength;
  if (!Number.isInteger(maxLength) || maxLength < 2) {
    fail(`expected maxLength to be a whole number >= 2, received ${String(maxLength)}`);
  }
  // the model's position limit and the ids' memory, checked before the rows are padded to it
  checkMaxLength(model, maxLength, 'generateText');
  checkMemory(texts.length, maxLength, null, null, options.memoryLimit, 'generateText');
  const start = preprocessor.addStartToken ? tokenizer.startTokenId : undefined;
  if (preprocessor.addStartToken && start == null) {
    fail('the preprocessor adds a start token, but the tokenizer has no startTokenId');
  }
  const padId = tokenizer.padTokenId ?? 0;
  const stops: readonly number[] =
    tokenizer.stopTokenIds ?? (tokenizer.endTokenId != null ? [tokenizer.endTokenId] : []);
  if (!Array.isArray(stops)) {
    fail(`expected the tokenizer's stopTokenIds to be an array of ids, received ${typeof stops}`);
  }
  const stopName = tokenizer.stopTokenIds == null ? 'endTokenId' : 'stopTokenIds';
  checkTokenizerFits(tokenizer, vocab, {start, padId, stops, stopName});
  const special = new Set(
    tokenizer.specialTokenIds ??
      [tokenizer.startTokenId, tokenizer.endTokenId, tokenizer.padTokenId].filter(
        (id) => id != null,
      ),
  );
  // keras-hub's StartEndPacker: [start] + ids, cut to maxLength (the prompt's end is dropped)
  const packed = texts.map((t) => {
    const ids = [...(start != null ? [start] : []), ...tokenizer.encode(t)].slice(0, maxLength);
    if (ids.length === 0) fail(`prompt ${JSON.stringify(t)} has no token and no start token`);
    return ids;
  });
  const lengths = packed.map((r) => r.length);
  const rows = packed.map((r) => [...r, ...new Array<number>(maxLength - r.length).fill(padId)]);
  // streaming: each row's generated ids and the text streamed so far
  const generated = texts.map(() => [] as number[]);
  const streamed = texts.map(() => '');
  const onStep: GenerateOptions['onStep'] =
    options.onToken == null
      ? undefined
      : (position, tokens) => {
          tokens.forEach((id, row) => {
            if (id == null) return;
            let text = '';
            if (!special.has(id)) {
              generated[row].push(id);
              const whole = tokenizer.decode(generated[row]);
              // the row's last token: the last position, or a stop token
              const last = position === maxLength - 1 || stops.includes(id);
              text = completed(whole, streamed[row], last);
              streamed[row] += text;
            }
            options.onToken?.(row, id, text);
          });
        };
  const out = await generate(model, rows, {
    maxLength,
    promptLengths: lengths,
    endId: stops,
    padId,
    sampler: options.sampler,
    k: options.k,
    p: options.p,
    temperature: options.temperature,
    seed: options.seed,
    useCache: options.useCache,
    onFallback: options.onFallback,
    onCompile: options.onCompile,
    memoryLimit: options.memoryLimit,
    onStep,
  });
  const ids = (await out.array()) as number[][];
  out.dispose();
  return ids.map((row, b) => {
    // keep the prompt and the generated tokens up to and including the first stop token
    let end = maxLength;
    for (let t = lengths[b]; t < maxLength; t++) {
      if (stops.includes(row[t])) {
        end = t + 1;
        break;
      }
    }
    const from = options.stripPrompt === true ? lengths[b] : 0;
    return tokenizer.decode(row.slice(from, end).filter((id) => !special.has(id)));
  });
}
