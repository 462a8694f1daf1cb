/**
 * Gemma 3 in int8 (`quantize(model, 'int8')`, Keras 3's scheme: every EinsumDense and Dense of the
 * blocks and the tied embedding): logits within 1e-4 of keras-hub's `quantize("int8")` logits
 * (fixtures/gemma3_family.py); greedy `generate` with the key / value cache gives the tokens of
 * `generate` without it; nothing left behind.
 */
import * as tf from '@tensorflow/tfjs';

import {buildKerasHubModel, generate, quantize} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {hubFixture} from '../helpers/hub_families_fixture';

const fx = hubFixture('../gemma3/causal_lm');
const g = fx.io.generate as NonNullable<typeof fx.io.generate>;
const int8Logits = (fx.io as unknown as {int8_logits: number[][][]}).int8_logits;

describeBackends('Gemma 3 in int8', () => {
  it("quantize(model, 'int8'): keras-hub's int8 logits within 1e-4; cached and uncached greedy tokens agree", async () => {
    const float = buildKerasHubModel('Gemma3CausalLM', fx.task.config, fx.taskWeights);
    const model = quantize(float, 'int8');
    float.dispose();
    const before = tf.memory().numTensors;
    const xs = ['token_ids', 'padding_mask'].map((n) =>
      tf.tensor2d(fx.io.inputs[n], undefined, 'int32'),
    );
    const logits = model.predict(xs) as tf.Tensor;
    expectClose(logits, int8Logits, 1e-4, 0);
    tf.dispose([logits, ...xs]);
    const tokens: number[][][] = [];
    for (const useCache of [true, false]) {
      const ids = await generate(model, g.token_ids, {
        maxLength: g.max_length,
        promptLengths: g.prompt_lengths,
        useCache,
      });
      tokens.push((await ids.array()) as number[][]);
      ids.dispose();
    }
    expect(tokens[0]).toEqual(tokens[1]);
    expect(tf.memory().numTensors).toBe(before);
    model.dispose();
  });
});
