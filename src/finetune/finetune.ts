/**
 * `finetune(preset, texts, options)`: LoRA fine-tuning of a keras-hub causal LM, as keras-hub
 * does it — `backbone.enable_lora(rank)`, `CausalLMPreprocessor` packing, `CausalLM`'s loss and
 * Keras' Adam (learning rate 2e-5 by default, `CausalLM.compile`'s) — in one function that runs
 * in Node and in a page. The loop, top to bottom: cut the texts into examples, shuffle them
 * (seeded) each epoch, pack a batch, one step (loss, gradients, update), report.
 */
import type {LayersModel} from '@tensorflow/tfjs-layers';

import {enableLora, loraRankOf} from '../layers/core/lora_model';
import {mulberry32} from '../ops/random';
import {
  packCausalLm,
  PackingPreprocessor,
  PackingTokenizer,
  textExamples,
} from './causal_lm_batches';
import {KerasAdam} from './keras_adam';
import {learningRateSchedule, ScheduleName} from './schedules';
import {trainStepAsync} from './train_step';

/** What {@link finetune} trains: a preset as `loadKerasHubPreset` returns it. */
export interface FinetunePreset {
  /** The causal LM (its inputs token ids and padding mask, its output the logits). */
  model: LayersModel;
  /** The preset's tokenizer (encodes the texts; its start, end and padding ids). */
  tokenizer: PackingTokenizer | null;
  /** The preset's preprocessor settings (sequence length, start and end tokens). */
  preprocessor: PackingPreprocessor | null;
}

/** Progress of {@link finetune}, after each step. */
export interface FinetuneProgress {
  /** Steps done (1 after the first). */
  step: number;
  /** Steps of the run. */
  steps: number;
  /** The pass over the examples the step belongs to (0 first). */
  epoch: number;
  /** The step's loss (before its update, as Keras reports it). */
  loss: number;
  /** Real (unpadded) tokens trained on per second, over the run so far. */
  tokensPerSecond: number;
  /** Milliseconds since the run began. */
  elapsedMs: number;
  /** The estimate of the milliseconds left (the mean step so far times the steps left). */
  remainingMs: number;
}

/** Options of {@link finetune}. */
export interface FinetuneOptions {
  /** LoRA's rank (when the model has no LoRA yet). Default 4. */
  rank?: number;
  /** LoRA's alpha; default the rank (keras-hub's `enable_lora` takes none). */
  alpha?: number;
  /** The layers to adapt; default keras-hub's `query_dense`, `value_dense`, `query`, `value`. */
  targets?: string[];
  /** Optimizer steps; default `epochs` passes over the examples. */
  steps?: number;
  /** Passes over the examples when `steps` is not given. Default 1. */
  epochs?: number;
  /** Examples per step. Default 4. */
  batchSize?: number;
  /** Tokens per example; default the preprocessor's `sequenceLength`. */
  sequenceLength?: number;
  /** Peak learning rate. Default 2e-5 (keras-hub's `CausalLM.compile`). */
  learningRate?: number;
  /** `'constant'` (default), `'linear'` or `'cosine'` decay to 0 over the run, after `warmupSteps`. */
  schedule?: ScheduleName;
  /** Steps of linear warm-up from 0. Default 0. */
  warmupSteps?: number;
  /** `'adam'` (default, Keras' Adam) or `'adamw'` (Keras' AdamW). */
  optimizer?: 'adam' | 'adamw';
  /** AdamW's weight decay. Default 0.004 (Keras'). */
  weightDecay?: number;
  /** Keras' `global_clipnorm`: the gradients scaled to at most this norm together. */
  globalClipnorm?: number;
  /** Seeds LoRA's A and the order of examples. Default 0. */
  seed?: number;
  /** Called after each step; a returned promise is awaited before the next (e.g. a checkpoint). */
  onProgress?: (p: FinetuneProgress) => void | Promise<void>;
  /** Stops the run between steps (what was trained stays in the model). */
  signal?: AbortSignal;
}

/** What {@link finetune} returns. */
export interface FinetuneResult {
  /** Each step's loss. */
  losses: number[];
  /** Real tokens trained on. */
  tokens: number;
  /** Wall time, milliseconds. */
  ms: number;
}

const OPTIONS = [
  'rank',
  'alpha',
  'targets',
  'steps',
  'epochs',
  'batchSize',
  'sequenceLength',
  'learningRate',
  'schedule',
  'warmupSteps',
  'optimizer',
  'weightDecay',
  'globalClipnorm',
  'seed',
  'onProgress',
  'signal',
];

function whole(name: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min) {
    throw new Error(`finetune: expected ${name} to be an integer >= ${min}, received ${value}`);
  }
  return value;
}

/** Fisher-Yates with a seeded generator. */
function shuffled<T>(items: T[], rng: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/**
 * Fine-tunes `preset.model` on `texts` with LoRA, in place: LoRA is enabled first (keras-hub's
 * targets, `rank`) unless the model has it. A single string is cut into examples (paragraphs,
 * each cut to fit `sequenceLength`); an array is taken as the examples. Generate from the model
 * after (`generateText`), save the adapters (`saveLoraWeights`) or the merged model
 * (`saveKerasFile`).
 *
 * @example
 * ```ts
 * const preset = await loadKerasHubPreset('./gpt2_preset');
 * const {losses} = await finetune(preset, text, {rank: 4, steps: 20, learningRate: 1e-3});
 * ```
 */
export async function finetune(
  preset: FinetunePreset,
  texts: string | string[],
  options: FinetuneOptions = {},
): Promise<FinetuneResult> {
  const unknown = Object.keys(options).filter((k) => !OPTIONS.includes(k));
  if (unknown.length > 0) {
    throw new Error(
      `finetune: unknown option(s) ${unknown.join(', ')}; expected ${OPTIONS.join(', ')}`,
    );
  }
  const {model, tokenizer, preprocessor} = preset ?? ({} as FinetunePreset);
  if (model == null || tokenizer == null || preprocessor == null) {
    throw new Error(
      'finetune: expected a preset with a model, a tokenizer and a preprocessor (a keras-hub ' +
        'CausalLM preset from loadKerasHubPreset)',
    );
  }
  const sequenceLength = whole(
    'sequenceLength',
    options.sequenceLength ?? preprocessor.sequenceLength,
    2,
  );
  const examples =
    typeof texts === 'string' ? textExamples(tokenizer, texts, sequenceLength) : [...texts];
  if (examples.length === 0) throw new Error('finetune: no text to train on');
  const batchSize = whole('batchSize', options.batchSize ?? 4, 1);
  const perEpoch = Math.ceil(examples.length / batchSize);
  const steps =
    options.steps != null
      ? whole('steps', options.steps, 1)
      : perEpoch * whole('epochs', options.epochs ?? 1, 1);
  const seed = options.seed ?? 0;
  // the optimizer's options checked before LoRA changes the model
  const peak = options.learningRate ?? 2e-5;
  if (!['adam', 'adamw'].includes(options.optimizer ?? 'adam')) {
    throw new Error(
      `finetune: expected optimizer 'adam' or 'adamw', received ${options.optimizer}`,
    );
  }
  const adamw = options.optimizer === 'adamw';
  const optimizer = new KerasAdam({
    learningRate: learningRateSchedule(
      options.schedule ?? 'constant',
      peak,
      steps,
      options.warmupSteps ?? 0,
    ),
    weightDecay: adamw ? (options.weightDecay ?? 0.004) : undefined,
    globalClipnorm: options.globalClipnorm,
  });
  if (loraRankOf(model) == null) {
    enableLora(model, options.rank ?? 4, {
      alpha: options.alpha,
      targets: options.targets,
      aInitializer: {className: 'HeUniform', config: {seed}},
    });
  }
  const rng = mulberry32(seed);
  const losses: number[] = [];
  let order: string[] = [];
  let tokens = 0;
  const began = Date.now();
  try {
    for (let step = 0; step < steps; step++) {
      if (options.signal?.aborted) break;
      const inEpoch = step % perEpoch;
      if (inEpoch === 0) order = shuffled(examples, rng);
      const texts = order.slice(inEpoch * batchSize, (inEpoch + 1) * batchSize);
      const batch = packCausalLm(tokenizer, preprocessor, texts, sequenceLength);
      losses.push(await trainStepAsync(model, batch, optimizer));
      tokens += batch.sampleWeight.flat().reduce((a, b) => a + b, 0);
      const elapsedMs = Date.now() - began;
      await options.onProgress?.({
        step: step + 1,
        steps,
        epoch: Math.floor(step / perEpoch),
        loss: losses[losses.length - 1],
        tokensPerSecond: elapsedMs > 0 ? (tokens * 1000) / elapsedMs : 0,
        elapsedMs,
        remainingMs: (elapsedMs / (step + 1)) * (steps - step - 1),
      });
      // let a page paint and the signal arrive between steps
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
  } finally {
    optimizer.dispose();
  }
  return {losses, tokens, ms: Date.now() - began};
}
