/**
 * The committed keras-hub fixtures of the model-family tests (fixtures/hub_families.py): configs,
 * weights by Keras 3 path, inputs and keras-hub's outputs.
 */
import * as fs from 'fs';
import * as path from 'path';

import type {HubWeightValue, JsonObject} from '../../src';

/** A fixture case as fixtures/hub_families.py writes it. */
export interface HubFixture {
  /** config.json's object (the serialized backbone). */
  backbone: JsonObject & {class_name: string; config: JsonObject};
  /** task.json's object (the serialized task). */
  task: JsonObject & {class_name: string; config: JsonObject};
  /** The task's weights by Keras 3 path. */
  taskWeights: Map<string, HubWeightValue>;
  /** The backbone's weights by its own Keras 3 paths (the preset's model.weights.h5). */
  backboneWeights: Map<string, HubWeightValue>;
  /** Inputs and keras-hub's outputs. */
  io: {
    inputs: Record<string, number[][]>;
    logits: number[][] | number[][][];
    backbone: Record<string, number[][] | number[][][]>;
    generate?: {
      token_ids: number[][];
      prompt_lengths: number[];
      max_length: number;
      tokens: number[][];
    };
  };
}

const DIR = path.join(__dirname, '..', 'fixtures', 'hub_families');

/** Reads fixture `name` (gpt2, bert, llama3). */
export function hubFixture(name: string): HubFixture {
  const dir = path.join(DIR, name);
  const json = (f: string) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
  const manifest = json('weights.json') as {
    weights: Array<{path: string; shape: number[]; offset: number}>;
    backbone_paths: string[];
  };
  const bin = fs.readFileSync(path.join(dir, 'weights.bin'));
  const all = new Float32Array(bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.byteLength));
  const taskWeights = new Map<string, HubWeightValue>();
  for (const w of manifest.weights) {
    const size = w.shape.reduce((p, d) => p * d, 1);
    taskWeights.set(w.path, {shape: w.shape, values: all.subarray(w.offset, w.offset + size)});
  }
  const task = json('task.json');
  // the task's paths of the backbone's weights: the backbone's own paths under one prefix
  const first = manifest.backbone_paths[0];
  const hit = manifest.weights.find((w) => w.path.endsWith(`/${first}`));
  const prefix = hit == null ? '' : hit.path.slice(0, hit.path.length - first.length);
  const backboneWeights = new Map<string, HubWeightValue>();
  for (const p of manifest.backbone_paths) {
    const w = taskWeights.get(prefix + p);
    if (w == null) throw new Error(`fixture ${name}: no task weight ${prefix + p}`);
    backboneWeights.set(p, w);
  }
  return {backbone: json('config.json'), task, taskWeights, backboneWeights, io: json('io.json')};
}
