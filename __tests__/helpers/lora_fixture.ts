/**
 * The LoRA fixtures of fixtures/lora_finetune.py (keras-hub 0.32, TensorFlow backend): a tiny
 * GPT-2 and Llama 3 preset (and Llama 3 quantized to int8), LoRA of rank 4 with seeded A and B
 * (`init.lora.h5`), one batch, the loss, the gradients, and the weights after 5 steps of Adam,
 * AdamW and Adam with a global clip norm. Read by the finetune and LoRA tests.
 */
import * as fs from 'fs';
import * as path from 'path';

import type * as tf from '@tensorflow/tfjs';
import type {LayerVariable} from '@tensorflow/tfjs-layers';

import {
  CausalLmBatch,
  KerasHubPreset,
  loadKerasHubPreset,
  loadLoraWeights,
  quantize,
} from '../../src';

export const LORA_DIR = path.join(__dirname, '..', 'fixtures', 'lora');
export const LORA_CASES = ['gpt2', 'llama3', 'llama3_int8'] as const;
export type LoraCase = (typeof LORA_CASES)[number];

export interface NamedValues {
  path: string;
  shape: number[];
  values: number[];
}

export interface OptimizerRun {
  config: {learning_rate: number; weight_decay: number | null; global_clipnorm: number | null};
  losses: number[];
  weights_after: NamedValues[];
}

export interface LoraExpected {
  rank: number;
  lora_enabled_layers: number[];
  weighted_layers: {index: number; name: string; class_name: string; path: string}[];
  trainable_variables: {path: string; shape: number[]}[];
  batch: {
    texts: string[];
    sequence_length: number;
    token_ids: number[][];
    padding_mask: number[][];
    y: number[][];
    sample_weight: number[][];
  };
  logits: number[];
  loss: number;
  gradients: NamedValues[];
  adam: OptimizerRun;
  adamw: OptimizerRun;
  adam_clipped: OptimizerRun;
  merged_logits: number[];
  generate_lora: {strings: string[]};
}

export function loraExpected(c: LoraCase): LoraExpected {
  return JSON.parse(
    fs.readFileSync(path.join(LORA_DIR, c, 'expected.json'), 'utf8'),
  ) as LoraExpected;
}

export const loraFile = (c: LoraCase, name: string): Uint8Array =>
  new Uint8Array(fs.readFileSync(path.join(LORA_DIR, c, name)));

/** The case's preset (int8: quantized as Keras quantized it), LoRA not enabled yet. */
export async function loadLoraCase(c: LoraCase): Promise<KerasHubPreset> {
  const preset = await loadKerasHubPreset(path.join(LORA_DIR, c, 'preset'));
  if (c !== 'llama3_int8') return preset;
  const float = preset.model;
  const int8 = quantize(float, 'int8');
  float.dispose();
  return {
    model: int8,
    get backbone(): tf.LayersModel {
      throw new Error('the int8 case has no backbone of its own');
    },
    tokenizer: preset.tokenizer,
    preprocessor: preset.preprocessor,
    dispose: () => int8.dispose(),
  };
}

/** The case's preset with LoRA enabled from init.lora.h5 (keras-hub's seeded A and B). */
export async function loadLoraCaseWithAdapters(c: LoraCase): Promise<KerasHubPreset> {
  const preset = await loadLoraCase(c);
  await loadLoraWeights(preset.model, loraFile(c, 'init.lora.h5'));
  return preset;
}

export function batchOf(e: LoraExpected): CausalLmBatch {
  return {
    tokenIds: e.batch.token_ids,
    paddingMask: e.batch.padding_mask,
    y: e.batch.y,
    sampleWeight: e.batch.sample_weight.map((r) => r.map(Number)),
  };
}

/** The largest |a - b| over the largest |b| (0 when b is all zeros and a equals it). */
export function relativeError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < b.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  return scale === 0 ? diff : diff / scale;
}

/** A variable of `model` by its Keras path (its tfjs name is the same path). */
export function variableAt(model: tf.LayersModel, p: string): LayerVariable {
  const v = model.weights.find((w) => w.originalName === p);
  if (v == null) throw new Error(`no weight '${p}' in the model`);
  return v;
}
