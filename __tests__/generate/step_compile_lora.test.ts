/**
 * The compiled step declines a layer with LoRA adapters, or a layer whose sublayer has them
 * (src/generate/step_compile.ts): a TransformerDecoder's feed-forward Dense, the
 * ReversibleEmbedding. The eager stepper applies them (its strings move away from the plain
 * model's); merged, the step compiles again and generates the same strings.
 */
import * as tf from '@tensorflow/tfjs';

import {enableLora, generateText, type LoraLayer, mergeLora, type StepReport} from '../../src';
import {useBackend} from '../helpers/backends';
import {lcg} from '../helpers/data';
import {loadLoraCase} from '../helpers/lora_fixture';

describe('the compiled step and LoRA on Dense / ReversibleEmbedding', () => {
  beforeAll(() => useBackend('cpu'));

  it.each([
    [
      'feedforward_intermediate_dense',
      /feedforward_intermediate_dense: it has LoRA adapters \(rank 2\)/,
    ],
    [
      'token_embedding',
      /layer 'token_embedding' \(ReversibleEmbedding\): it has LoRA adapters \(rank 2\)/,
    ],
  ])(
    '%s: declines with the reason; merged, compiles to the same strings',
    async (target, reason) => {
      const preset = await loadLoraCase('gpt2');
      const prompts = ['the quick brown', 'hello world'];
      let report: StepReport | null = null;
      const onCompile = (r: StepReport) => {
        report = r;
      };
      const plain = await generateText(preset, prompts, {maxLength: 16, onCompile});
      expect((report as StepReport | null)?.compiled).toBe(true);
      const adapted = enableLora(preset.model, 2, {targets: [target]});
      adapted.forEach((l: LoraLayer, i) => {
        const b = l.lora!.b;
        const shape = b.shape as number[];
        const t = tf.tensor(lcg(shape[0] * shape[1], 40 + i, 3), shape);
        b.write(t);
        t.dispose();
      });
      const eager = await generateText(preset, prompts, {maxLength: 16, onCompile});
      expect((report as StepReport | null)?.compiled).toBe(false);
      expect((report as StepReport | null)?.reason).toMatch(reason);
      expect(eager).not.toEqual(plain);
      mergeLora(preset.model);
      expect(await generateText(preset, prompts, {maxLength: 16, onCompile})).toEqual(eager);
      expect((report as StepReport | null)?.compiled).toBe(true);
      preset.dispose();
    },
  );
});
