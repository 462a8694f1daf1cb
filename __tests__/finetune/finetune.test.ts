/**
 * finetune(): the whole loop. From keras-hub's seeded adapters, 5 steps on the fixture's batch
 * (its 3 texts packed here from the strings, at sequence length 12) reach keras-hub's losses and
 * weights after 5 Adam steps; progress is reported after each step; a seed gives the same run; a
 * signal stops it between steps; bad input is refused before anything trains.
 */
import * as tf from '@tensorflow/tfjs';

import {finetune, type FinetuneProgress} from '../../src';
import {describeBackends} from '../helpers/backends';
import {
  loadLoraCase,
  loadLoraCaseWithAdapters,
  loraExpected,
  relativeError,
  variableAt,
} from '../helpers/lora_fixture';

describeBackends('finetune', () => {
  const e = loraExpected('gpt2');

  it("reaches keras-hub's losses and weights from its texts (packing, loss, Adam)", async () => {
    const preset = await loadLoraCaseWithAdapters('gpt2');
    const before = tf.memory().numTensors;
    const seen: FinetuneProgress[] = [];
    const {losses, tokens} = await finetune(preset, e.batch.texts, {
      steps: 5,
      batchSize: 3,
      sequenceLength: 12,
      learningRate: 1e-3,
      onProgress: (p) => {
        seen.push(p);
      },
    });
    expect(tf.memory().numTensors).toBe(before);
    expect(relativeError(losses, e.adam.losses)).toBeLessThan(1e-5);
    for (const w of e.adam.weights_after) {
      expect(
        relativeError(variableAt(preset.model, w.path).read().dataSync(), w.values),
      ).toBeLessThan(1e-4);
    }
    const real = e.batch.sample_weight.flat().reduce((a, b) => a + Number(b), 0);
    expect(tokens).toBe(5 * real);
    expect(seen.map((p) => [p.step, p.steps, p.epoch])).toEqual([
      [1, 5, 0],
      [2, 5, 1],
      [3, 5, 2],
      [4, 5, 3],
      [5, 5, 4],
    ]);
    expect(seen.map((p) => p.loss)).toEqual(losses);
    expect(seen[4].remainingMs).toBe(0);
    preset.dispose();
  });

  it('enables LoRA at the given rank when the model has none, seeded: one seed, one run', async () => {
    const run = async (seed: number) => {
      const preset = await loadLoraCase('gpt2');
      const {losses} = await finetune(preset, e.batch.texts, {
        rank: 2,
        steps: 3,
        batchSize: 2,
        learningRate: 1e-2,
        seed,
      });
      const a = variableAt(preset.model, 'transformer_layer_0/self_attention/query/lora_kernel_a');
      expect(a.shape).toEqual([16, 2, 2]);
      expect(preset.model.trainableWeights.length).toBe(12); // 4 targets: bias, A, B
      preset.dispose();
      return losses;
    };
    const [a, b, c] = [await run(7), await run(7), await run(8)];
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
  });

  it('stops between steps when its signal is aborted', async () => {
    const preset = await loadLoraCaseWithAdapters('gpt2');
    const stop = new AbortController();
    const {losses} = await finetune(preset, e.batch.texts, {
      steps: 10,
      batchSize: 3,
      signal: stop.signal,
      onProgress: (p) => {
        if (p.step === 2) stop.abort();
      },
    });
    expect(losses.length).toBe(2);
    preset.dispose();
  });

  it('refuses what it cannot train on, saying what it expected', async () => {
    const preset = await loadLoraCase('gpt2');
    await expect(finetune(preset, [], {steps: 1})).rejects.toThrow('finetune: no text to train on');
    await expect(
      finetune(preset, ['a'], {steps: 1, lerningRate: 1} as unknown as {steps: number}),
    ).rejects.toThrow(/unknown option\(s\) lerningRate; expected rank, alpha/);
    await expect(finetune(preset, ['a'], {batchSize: 0})).rejects.toThrow(
      'finetune: expected batchSize to be an integer >= 1, received 0',
    );
    await expect(
      finetune({model: preset.model, tokenizer: null, preprocessor: null}, ['a']),
    ).rejects.toThrow(/expected a preset with a model, a tokenizer and a preprocessor/);
    expect(preset.model.trainableWeights.length).toBe(preset.model.weights.length);
    preset.dispose();
  });
});
