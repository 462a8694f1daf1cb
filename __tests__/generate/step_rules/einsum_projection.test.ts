/**
 * The compiled step and LoRA: a projection with adapters declines (the eager stepper applies
 * them, and the report says why); merged, the step compiles again. Either way the greedy strings
 * are keras-hub's own for the tiny GPT-2 and Llama 3 in keras-hub's state after 5 Adam steps
 * (fixtures/lora_finetune.py: `generate` with the sampler "greedy").
 */
import * as tf from '@tensorflow/tfjs';

import {generateText, loadLoraWeights, mergeLora, type StepReport} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {loadLoraCase, loraExpected, loraFile, variableAt} from '../../helpers/lora_fixture';

describeBackends('LoRA adapters on the compiled step', () => {
  describe.each(['gpt2', 'llama3'] as const)('%s', (c) => {
    const e = loraExpected(c);

    it("declines with the reason, generates keras-hub's strings, and compiles once merged", async () => {
      const preset = await loadLoraCase(c);
      await loadLoraWeights(preset.model, loraFile(c, 'trained.lora.h5'));
      for (const w of e.adam.weights_after.filter((v) => v.path.endsWith('/bias'))) {
        variableAt(preset.model, w.path).write(tf.tensor(w.values, w.shape));
      }
      const prompts = ['the quick brown', 'hello world'];
      let report: StepReport | null = null;
      const onCompile = (r: StepReport) => {
        report = r;
      };
      expect(await generateText(preset, prompts, {maxLength: 16, onCompile})).toEqual(
        e.generate_lora.strings,
      );
      expect((report as StepReport | null)?.compiled).toBe(false);
      expect((report as StepReport | null)?.reason).toMatch(
        /its query projection 'query' has LoRA adapters \(rank 4\); the eager stepper applies them \(mergeLora\(model\)/,
      );
      mergeLora(preset.model);
      expect(await generateText(preset, prompts, {maxLength: 16, onCompile})).toEqual(
        e.generate_lora.strings,
      );
      expect((report as StepReport | null)?.compiled).toBe(true);
      preset.dispose();
    });
  });
});
