/**
 * One fine-tuning step against keras-hub 0.32 (fixtures/lora_finetune.py): the loss and every
 * gradient of the trainable weights (A, B and the targets' biases) within 1e-5 relative, and the
 * weights after 5 steps of Keras' Adam, AdamW and Adam with a global clip norm within 1e-4, on a
 * tiny GPT-2, a Llama 3 and the Llama 3 quantized to int8 (LoRA's product after the int8 one).
 */
import * as tf from '@tensorflow/tfjs';

import {KerasAdam, type KerasHubPreset} from '../../src';
import {lossAndGradients, trainStep, trainStepAsync} from '../../src/finetune/train_step';
import {describeBackends} from '../helpers/backends';
import {
  batchOf,
  LORA_CASES,
  loadLoraCaseWithAdapters,
  loraExpected,
  OptimizerRun,
  relativeError,
  variableAt,
} from '../helpers/lora_fixture';

describeBackends('a LoRA training step against keras-hub', () => {
  describe.each(LORA_CASES)('%s', (c) => {
    const e = loraExpected(c);
    let preset: KerasHubPreset;
    beforeEach(async () => {
      preset = await loadLoraCaseWithAdapters(c);
    });
    afterEach(() => preset.dispose());

    it('trains what keras-hub trains: each target bias, A and B, nothing else', () => {
      const mine = preset.model.trainableWeights.map((w) => w.originalName).sort();
      expect(mine).toEqual(e.trainable_variables.map((v) => v.path).sort());
    });

    it('gives the loss and every gradient within 1e-5 (relative)', () => {
      const before = tf.memory().numTensors;
      const {loss, variables, grads} = lossAndGradients(preset.model, batchOf(e));
      expect(Math.abs(loss - e.loss) / e.loss).toBeLessThan(1e-5);
      for (const g of e.gradients) {
        const at = variables.findIndex((v) => v.originalName === g.path);
        expect(at).toBeGreaterThanOrEqual(0);
        const err = relativeError(grads[at].dataSync(), g.values);
        if (err > 1e-5) throw new Error(`${g.path}: gradient off by ${err} (relative)`);
      }
      tf.dispose(grads);
      expect(tf.memory().numTensors).toBe(before);
    });

    it('gives the same loss and gradients with the head in chunks of 3 rows (1e-5 relative)', () => {
      const {loss, variables, grads} = lossAndGradients(preset.model, batchOf(e), 3);
      expect(Math.abs(loss - e.loss) / e.loss).toBeLessThan(1e-5);
      for (const g of e.gradients) {
        const at = variables.findIndex((v) => v.originalName === g.path);
        const err = relativeError(grads[at].dataSync(), g.values);
        if (err > 1e-5) throw new Error(`${g.path}: gradient off by ${err} (relative)`);
      }
      tf.dispose(grads);
    });

    it(`${c === 'llama3_int8' ? 'makes' : 'never makes'} the whole logits (int8 heads keep them)`, async () => {
      const batch = batchOf(e);
      const vocab = preset.model.outputs[0].shape[2] as number;
      const positions = batch.tokenIds.length * batch.tokenIds[0].length;
      const p = await tf.profile(() => tf.dispose(lossAndGradients(preset.model, batch, 2).grads));
      const whole = p.kernels.filter((k) =>
        k.outputShapes.some(
          (s) =>
            s != null &&
            s[s.length - 1] === vocab &&
            s.reduce((a, b) => a * b, 1) === positions * vocab,
        ),
      );
      // the chunked head's largest logits are [2, vocab]
      expect(whole.length > 0).toBe(c === 'llama3_int8');
    });

    const runs: [string, (r: OptimizerRun) => KerasAdam][] = [
      ['adam', (r) => new KerasAdam({learningRate: r.config.learning_rate})],
      [
        'adamw',
        (r) =>
          new KerasAdam({
            learningRate: r.config.learning_rate,
            weightDecay: r.config.weight_decay as number,
          }),
      ],
      [
        'adam_clipped',
        (r) =>
          new KerasAdam({
            learningRate: r.config.learning_rate,
            globalClipnorm: r.config.global_clipnorm as number,
          }),
      ],
    ];
    it.each(runs)('reaches keras-hub weights after 5 steps of %s (1e-4)', (name, make) => {
      const run = e[name as 'adam' | 'adamw' | 'adam_clipped'];
      const optimizer = make(run);
      const losses: number[] = [];
      for (let i = 0; i < 5; i++) losses.push(trainStep(preset.model, batchOf(e), optimizer));
      optimizer.dispose();
      expect(relativeError(losses, run.losses)).toBeLessThan(1e-5);
      for (const w of run.weights_after) {
        const err = relativeError(variableAt(preset.model, w.path).read().dataSync(), w.values);
        if (err > 1e-4) throw new Error(`${w.path}: off by ${err} (relative) after 5 steps`);
      }
    });

    // finetune's step: the loss read with data(), not dataSync (tfjs-backend-webgpu's
    // synchronous read loses the device in a page), to the same losses and weights
    it('reaches keras-hub weights after 5 steps of adam with the loss read asynchronously', async () => {
      const run = e.adam;
      const optimizer = new KerasAdam({learningRate: run.config.learning_rate});
      const before = tf.memory().numTensors;
      const dataSync = jest.spyOn(tf.Tensor.prototype, 'dataSync');
      const losses: number[] = [];
      try {
        for (let i = 0; i < 5; i++) {
          losses.push(await trainStepAsync(preset.model, batchOf(e), optimizer));
        }
        // the forward pass reads its token ids; no scalar (the loss) is read synchronously
        const scalars = dataSync.mock.contexts.filter((t) => (t as tf.Tensor).rank === 0);
        expect(scalars).toEqual([]);
      } finally {
        dataSync.mockRestore();
      }
      optimizer.dispose();
      // the optimizer's slots are gone with it: only the adapters' values remain, as before
      expect(tf.memory().numTensors).toBe(before);
      expect(relativeError(losses, run.losses)).toBeLessThan(1e-5);
      for (const w of run.weights_after) {
        const err = relativeError(variableAt(preset.model, w.path).read().dataSync(), w.values);
        if (err > 1e-4) throw new Error(`${w.path}: off by ${err} (relative) after 5 steps`);
      }
    });
  });
});
