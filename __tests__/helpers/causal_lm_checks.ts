/**
 * The tests a causal LM family's fixture tests share (fixtures/causal_lm_fixture.py's fixtures,
 * read with causal_lm_family.ts), each registered where it is called: logits of right-padded
 * prompts within 1e-4, generate's greedy ids on the compiled step, generateText's strings, and the
 * task's .keras file's logits; each leaves no tensor behind.
 */
import * as tf from '@tensorflow/tfjs';

import {generateText, loadKerasModel} from '../../src';
import type {KerasHubPreset, StepReport} from '../../src';
import type {CausalLMExpected} from './causal_lm_family';
import {
  expectKerasHubIds,
  generatedIds,
  largestDifference,
  predictLogits,
} from './causal_lm_family';

const TOL = 1e-4;

/** keras-hub's logits of right-padded prompts, within 1e-4. */
export function itGivesPaddedLogits(e: CausalLMExpected, presetOf: () => KerasHubPreset): void {
  it("gives keras-hub's logits of right-padded prompts (within 1e-4)", () => {
    const before = tf.memory().numTensors;
    const logits = predictLogits(presetOf().model, e.paddedLogits);
    expect(largestDifference(logits, e.paddedLogits.values)).toBeLessThan(TOL);
    expect(tf.memory().numTensors).toBe(before);
  });
}

/** generate's greedy ids on the compiled step, then generateText's strings: keras-hub's. */
export function itGeneratesKerasHubOutputs(
  e: CausalLMExpected,
  presetOf: () => KerasHubPreset,
): void {
  it("generate: keras-hub's greedy ids (each row up to its stop token, then padding), on the compiled step", async () => {
    expect(e.generate.some((g) => g.paddingMask.includes(false))).toBe(true); // a row stops
    const before = tf.memory().numTensors;
    const {ids, report} = await generatedIds(presetOf().model, e, 0);
    expect(report).toMatchObject({compiled: true, reason: null});
    expectKerasHubIds(e, ids, 0);
    expect(tf.memory().numTensors).toBe(before);
  });

  it("generateText: keras-hub's greedy strings (stop token and special tokens stripped), on the compiled step", async () => {
    const before = tf.memory().numTensors;
    let report: StepReport | null = null;
    const texts = await generateText(presetOf(), e.prompts, {
      maxLength: e.maxLength,
      onCompile: (r) => (report = r),
    });
    expect(report).toMatchObject({compiled: true, reason: null});
    expect(texts).toEqual(e.generate.map((g) => g.text));
    expect(tf.memory().numTensors).toBe(before);
  });
}

/** loadKerasModel reads the task's .keras file (`taskClass` names it in the title). */
export function itLoadsTaskFile(
  taskClass: string,
  fx: {taskFile: string; expected: CausalLMExpected},
): void {
  it(`loadKerasModel reads ${taskClass}'s .keras file: keras-hub's logits within 1e-4`, async () => {
    const e = fx.expected;
    const model = await loadKerasModel(fx.taskFile);
    const before = tf.memory().numTensors;
    const logits = predictLogits(model, e.logits);
    expect(largestDifference(logits, e.logits.values)).toBeLessThan(TOL);
    expect(tf.memory().numTensors).toBe(before);
    model.dispose();
  });
}
