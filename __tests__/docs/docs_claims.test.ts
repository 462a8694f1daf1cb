/**
 * What the docs say of keras-hub and Keras, checked against what they are and what they wrote:
 * keras-hub's `generate` samples top-k unless compiled with `sampler="greedy"`, and Keras 3.15
 * quantizes the token embedding of keras-hub 0.32's GPT-2 (its tied logits are int8 in Keras).
 */
import * as fs from 'fs';
import * as path from 'path';

import {Hdf5Reader} from '../../src/io/hdf5_datasets';

const root = path.resolve(__dirname, '..', '..');
const docs = ['README.md', ...fs.readdirSync(path.join(root, 'docs')).map((f) => `docs/${f}`)]
  .filter((f) => f.endsWith('.md'))
  .map((f) => ({file: f, text: fs.readFileSync(path.join(root, f), 'utf8')}));

/** The paragraphs of a markdown text (blank-line separated; a code block counts as one). */
const paragraphs = (text: string) => text.split(/\n\s*\n/);

describe('what the docs say of keras-hub', () => {
  it('a greedy string "keras-hub returns" is the one after compile(sampler="greedy")', () => {
    // keras-hub 0.32's CausalLM.compile defaults to sampler="top_k": generate is random there
    const unsaid: string[] = [];
    let claims = 0;
    for (const {file, text} of docs) {
      for (const p of paragraphs(text)) {
        if (!/greedy/i.test(p) || !/keras-hub's `?(CausalLM\.|GPT2CausalLM\.)?generate/.test(p)) {
          continue;
        }
        claims += 1;
        if (!p.includes('sampler="greedy"')) unsaid.push(`${file}: ${p.slice(0, 120)}...`);
      }
    }
    expect(claims).toBeGreaterThanOrEqual(3); // the claims are there to check
    expect(unsaid).toEqual([]);
  });

  it("Keras 3.15 quantizes keras-hub 0.32's GPT-2 token embedding, as the docs say", async () => {
    // an int8 preset keras-hub and Keras wrote (fixtures/int8_files.py: model.quantize("int8"))
    const file = path.join(root, '__tests__/fixtures/int8_files/gpt2_preset/model.weights.h5');
    const reader = await Hdf5Reader.open(new Uint8Array(fs.readFileSync(file)), 'model.weights.h5');
    const table = reader.dataset('layers/reversible_embedding/vars/0');
    expect(table.fileType).toBe('<i1'); // the tied table: int8, with a scale per row beside it
    expect(reader.dataset('layers/reversible_embedding/vars/1').shape).toEqual([table.shape[0]]);
    const generation = docs.find((d) => d.file === 'docs/generation.md')!.text;
    expect(generation).toMatch(
      /`keras\.layers\.ReversibleEmbedding`, which Keras'\s+`model\.quantize/,
    );
    // and no doc says Keras skips keras-hub's embedding for these families (it said so before)
    for (const {file, text} of docs) {
      for (const p of paragraphs(text)) {
        if (/is skipped by Keras/.test(p) && /ReversibleEmbedding/.test(p)) {
          throw new Error(`${file} says Keras skips ReversibleEmbedding: ${p.slice(0, 160)}`);
        }
      }
    }
  });
});
