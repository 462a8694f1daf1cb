/**
 * Mistral in `generate`'s compiled decoding step (src/hub_models/mistral/mistral_step_rules.ts):
 * the family's rules compile keras-hub's fixture (fixtures/mistral_family.py; the sliding window of 4 positions passed to the step's attention), `onCompile`
 * reports it, and at every generated position of keras-hub's greedy rows the compiled step's
 * logits are the eager stepper's (the layers' own tfjs ops) within 1e-4 with the same greedy
 * token; float32 and int8 (`quantize(model, 'int8')`), on cpu and wasm; nothing left behind.
 */
import * as tf from '@tensorflow/tfjs';

import {loadKerasHubPreset, quantize} from '../../src';
import type {KerasHubPreset} from '../../src';
import {describeBackends} from '../helpers/backends';
import {
  causalLMFixture,
  expectCompiledMatchesEager,
  expectKerasHubIds,
  generatedIds,
  largestDifference,
  predictLogits,
} from '../helpers/causal_lm_family';

const fx = causalLMFixture('mistral');
const e = fx.expected;
const TOL = 1e-4;

describeBackends('Mistral in the compiled step', () => {
  let preset: KerasHubPreset;
  beforeAll(async () => {
    preset = await loadKerasHubPreset(fx.preset);
  });
  afterAll(() => preset?.dispose());

  it("float32: the eager stepper's logits (within 1e-4) and greedy token at every position", () => {
    const before = tf.memory().numTensors;
    const report = expectCompiledMatchesEager(preset.model, e, TOL);
    expect(report.compiled).toBe(true);
    expect(tf.memory().numTensors).toBe(before);
  });

  it("int8 (quantize(model, 'int8')): compiled (its report says so), the eager int8 stepper's logits at every position", async () => {
    const model = quantize(preset.model, 'int8');
    const before = tf.memory().numTensors;
    const report = expectCompiledMatchesEager(model, e, TOL);
    expect(report.compiled).toBe(true);
    const {report: generated} = await generatedIds(model, e, 0);
    expect(generated).toMatchObject({compiled: true});
    expect(tf.memory().numTensors).toBe(before);
    model.dispose();
  });

  it("int8: keras-hub's int8 logits (backbone.quantize('int8')) within 1e-4", () => {
    const int8 = e.int8Logits as {shape: number[]; values: number[]};
    const model = quantize(preset.model, 'int8');
    const before = tf.memory().numTensors;
    const logits = predictLogits(model, {...e.logits, shape: int8.shape, values: int8.values});
    expect(largestDifference(logits, int8.values)).toBeLessThan(TOL);
    expect(tf.memory().numTensors).toBe(before);
    model.dispose();
  });

  it("generate's compiled ids are keras-hub's greedy ids", async () => {
    const {ids, report} = await generatedIds(preset.model, e, 0);
    expect(report?.compiled).toBe(true);
    expectKerasHubIds(e, ids, 0);
  });
});
