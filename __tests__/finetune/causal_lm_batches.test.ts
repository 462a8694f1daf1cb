/**
 * Packing for training as keras-hub's CausalLMPreprocessor does it (src/finetune/
 * causal_lm_batches.ts): the tiny GPT-2 and Llama 3 presets' tokenizers and preprocessors on the
 * fixture's texts at sequence_length 12 give keras-hub's token_ids, padding_mask, y and
 * sample_weight exactly (fixtures/lora_finetune.py); a text longer than the length is cut as
 * StartEndPacker cuts it (the ids truncated to leave room, then the start and end tokens), shown
 * with a character tokenizer whose packing is written out by hand; textExamples' paragraphs and
 * cuts.
 */
import {packCausalLm, type PackingTokenizer} from '../../src';
import {textExamples} from '../../src/finetune/causal_lm_batches';
import {useBackend} from '../helpers/backends';
import {loadLoraCase, loraExpected} from '../helpers/lora_fixture';

/** One id per character ('a' = 10, 'b' = 11, ...), start 1, end 2, pad 0. */
const chars: PackingTokenizer = {
  encode: (t) => [...t].map((ch) => ch.charCodeAt(0) - 87),
  startTokenId: 1,
  endTokenId: 2,
  padTokenId: 0,
};
const [a, b, c, d] = [10, 11, 12, 13];

/** One id per word. */
const words: PackingTokenizer = {
  encode: (t) =>
    t
      .split(/\s+/)
      .filter((w) => w !== '')
      .map(() => 5),
};

describe('packCausalLm', () => {
  beforeAll(() => useBackend('cpu'));

  it.each(['gpt2', 'llama3'] as const)(
    "gives keras-hub's batch for the %s preset (sequence_length 12)",
    async (name) => {
      const x = loraExpected(name);
      const preset = await loadLoraCase(name);
      const batch = packCausalLm(
        preset.tokenizer as unknown as PackingTokenizer,
        preset.preprocessor!,
        x.batch.texts,
        x.batch.sequence_length,
      );
      expect(batch.tokenIds).toEqual(x.batch.token_ids);
      expect(batch.paddingMask).toEqual(x.batch.padding_mask);
      expect(batch.y).toEqual(x.batch.y);
      expect(batch.sampleWeight).toEqual(x.batch.sample_weight);
      // the first text is longer than 12 tokens: its start kept, its end token last in y
      const tok = preset.tokenizer as unknown as Required<PackingTokenizer>;
      const ids = tok.encode(x.batch.texts[0]);
      expect(ids.length).toBeGreaterThan(12);
      expect(batch.tokenIds[0]).toEqual([tok.startTokenId, ...ids.slice(0, 11)]);
      expect(batch.y[0]).toEqual([...ids.slice(0, 11), tok.endTokenId]);
      preset.dispose();
    },
  );

  it('truncates before adding the start and end tokens, then pads (written out by hand)', () => {
    const p = {sequenceLength: 4, addStartToken: true, addEndToken: true};
    const batch = packCausalLm(chars, p, ['abcde', 'ab', '']);
    // packed to 5: [1, a, b, c, 2] / [1, a, b, 2, 0] / [1, 2, 0, 0, 0]
    expect(batch.tokenIds).toEqual([
      [1, a, b, c],
      [1, a, b, 2],
      [1, 2, 0, 0],
    ]);
    expect(batch.paddingMask).toEqual([
      [1, 1, 1, 1],
      [1, 1, 1, 1],
      [1, 1, 0, 0],
    ]);
    expect(batch.y).toEqual([
      [a, b, c, 2],
      [a, b, 2, 0],
      [2, 0, 0, 0],
    ]);
    expect(batch.sampleWeight).toEqual([
      [1, 1, 1, 1],
      [1, 1, 1, 0],
      [1, 0, 0, 0],
    ]);
  });

  it('leaves out the tokens the preprocessor does not add, pads with the tokenizer pad id', () => {
    const noEnd = packCausalLm(
      chars,
      {sequenceLength: 4, addStartToken: true, addEndToken: false},
      ['abcde'],
    );
    expect(noEnd.tokenIds).toEqual([[1, a, b, c]]);
    expect(noEnd.y).toEqual([[a, b, c, d]]);
    const noStart = packCausalLm(chars, {sequenceLength: 4, addStartToken: false}, ['abcdef', 'a']);
    expect(noStart.tokenIds).toEqual([
      [a, b, c, d],
      [a, 2, 0, 0],
    ]);
    expect(noStart.y).toEqual([
      [b, c, d, 2],
      [2, 0, 0, 0],
    ]);
    const padded = packCausalLm(
      {...chars, padTokenId: 9},
      {sequenceLength: 4, addStartToken: true},
      ['a'],
    );
    expect(padded.tokenIds).toEqual([[1, a, 2, 9]]);
    expect(padded.y).toEqual([[a, 2, 9, 9]]);
    expect(padded.sampleWeight).toEqual([[1, 1, 0, 0]]);
    // the length given overrides the preprocessor's
    expect(
      packCausalLm(chars, {sequenceLength: 4, addStartToken: true}, ['abcde'], 2).tokenIds,
    ).toEqual([[1, a]]);
  });

  it('refuses a bad length, a missing or bad special token and a text that is not a string', () => {
    const p = {sequenceLength: 4, addStartToken: true};
    expect(() => packCausalLm(chars, p, ['a'], 0)).toThrow(
      'fine-tuning: expected sequenceLength to be a positive integer, received 0',
    );
    expect(() => packCausalLm(chars, p, ['a'], 1.5)).toThrow(
      'fine-tuning: expected sequenceLength to be a positive integer, received 1.5',
    );
    expect(() => packCausalLm({encode: chars.encode}, p, ['a'])).toThrow(
      'fine-tuning: the preprocessor adds a start token, but the tokenizer has none',
    );
    expect(() => packCausalLm({...chars, startTokenId: -1}, p, ['a'])).toThrow(
      "fine-tuning: the tokenizer's startTokenId is -1, not a token id",
    );
    expect(() => packCausalLm({...chars, padTokenId: 0.5}, p, ['a'])).toThrow(
      "fine-tuning: the tokenizer's padTokenId is 0.5, not a token id",
    );
    expect(() => packCausalLm(chars, p, [3 as unknown as string])).toThrow(
      'fine-tuning: expected texts as strings, received number',
    );
  });
});

describe('textExamples', () => {
  beforeAll(() => useBackend('cpu'));

  it('splits paragraphs at blank lines and cuts a long one at whitespace, greedily', () => {
    const text = 'a b c d e f g\n\n  \n\nh i\n \nj k l m';
    // sequenceLength 4: at most 3 words per example
    expect(textExamples(words, text, 4)).toEqual(['a b c', 'd e f', 'g', 'h i', 'j k l', 'm']);
    expect(textExamples(words, '\n\n', 4)).toEqual([]);
  });

  it('cuts GPT-2 text so each example encodes to at most sequenceLength - 1 tokens', async () => {
    const preset = await loadLoraCase('gpt2');
    const tok = preset.tokenizer as unknown as PackingTokenizer;
    const para1 =
      'the quick brown fox jumps over the lazy dog and then the small dog jumps over the fox';
    const para2 = 'hello world';
    const para3 = 'a small world of words that goes on and on for a while longer than twelve';
    const text = `${para1}\n\n${para2}\n\n\n${para3}\n`;
    const n = 12;
    const out = textExamples(tok, text, n);
    for (const ex of out) expect(tok.encode(ex).length).toBeLessThanOrEqual(n - 1);
    // no word lost or moved, no example across two paragraphs
    const perParagraph = [para1, para2, para3].map((p) => p.split(' '));
    const got = out.map((ex) => ex.split(' '));
    let at = 0;
    for (const p of perParagraph) {
      const taken: string[] = [];
      while (taken.length < p.length) {
        const ex = got[at];
        // greedy: a cut example could not have taken the paragraph's next word
        if (taken.length + ex.length < p.length) {
          const longer = [...ex, p[taken.length + ex.length]].join(' ');
          expect(tok.encode(longer).length).toBeGreaterThan(n - 1);
        }
        taken.push(...ex);
        at++;
      }
      expect(taken).toEqual(p);
    }
    expect(at).toBe(out.length);
    expect(out.length).toBeGreaterThan(3); // the long paragraphs were cut
    preset.dispose();
  });
});
