/**
 * A tied Llama 3's prefill in the compiled step (src/generate/step_cut.ts on the family's
 * program): the first token needs only each batch row's last position, so after the last
 * attention op the last decoder's output projection, its SwiGLU products, the final RMS norm and
 * the tied logits (the `denseT` over the whole embedding table, the prompt's most costly product)
 * read and write the last rows only, never the prompt's; float32 and int8.
 */
import * as tf from '@tensorflow/tfjs';

import {buildKerasHubModel, quantize} from '../../src';
import {compileStep} from '../../src/generate/step_compile';
import {operands} from '../../src/generate/step_ops';
import {planOf} from '../helpers/eager_logits';
import {hubFixture} from '../helpers/hub_families_fixture';

/** keras-hub's tiny Llama 3 fixture with one embedding table (tie_word_embeddings). */
function tiedLlama(): tf.LayersModel {
  const fx = hubFixture('llama3');
  const weights = new Map(fx.taskWeights);
  weights.delete('layers/llama3_backbone/layers/reversible_embedding/vars/1');
  const config = JSON.parse(JSON.stringify(fx.task.config));
  config.backbone.config.tie_word_embeddings = true;
  return buildKerasHubModel('Llama3CausalLM', config, weights);
}

describe('a tied Llama 3 prefill computes the logits of the last rows only', () => {
  for (const dtype of ['float32', 'int8'] as const) {
    it(`after the last attention every op, the tied logits included, runs on the last rows (${dtype})`, () => {
      const float = tiedLlama();
      const model = dtype === 'int8' ? quantize(float, 'int8') : float;
      try {
        const {program} = compileStep(planOf(model));
        if (program == null) throw new Error('not compiled');
        const last = program.ops.map((o) => o.op).lastIndexOf('attention');
        expect(program.cachedOps).toBe(last + 1);
        const after = program.ops.slice(last + 1);
        const logitsOp = dtype === 'int8' ? 'denseTInt8' : 'denseT';
        const tied = after.filter((o) => o.op === logitsOp);
        expect(tied.length).toBe(1);
        expect(program.ops.slice(0, last + 1).some((o) => o.op === logitsOp)).toBe(false);
        expect(program.values[program.logits].rows).toBe('last');
        for (const o of after) {
          const {reads, writes} = operands(o);
          for (const v of [...reads, ...writes]) {
            // a lastRows reads the rows of every position and writes the last ones
            const rows = program.values[v].rows;
            const want = o.op === 'lastRows' && reads.includes(v) ? 'all' : 'last';
            expect([o.op, v, rows]).toEqual([o.op, v, want]);
          }
        }
      } finally {
        if (model !== float) model.dispose();
        float.dispose();
      }
    });
  }
});
