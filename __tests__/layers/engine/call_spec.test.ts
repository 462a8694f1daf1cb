/**
 * The calling convention as a pure function (no layer is built), and the traps it closes on the
 * layers: float masks passed positionally, misspelled call options, counts in errors, and
 * computeOutputShape for calls that apply accepts.
 */
import * as tf from '@tensorflow/tfjs';

import {AdditiveAttention, Attention, MultiHeadAttention} from '../../../src';
import {classifyInputs, dedupeInputs, resolveCall} from '../../../src/layers/engine/call_spec';

const settings = {
  caller: "Layer 'l'",
  inputRoles: null,
  useCausalMask: false,
  returnAttentionScores: false,
};
const f = (shape: number[]) => ({shape, dtype: 'float32'});

describe('resolveCall (pure)', () => {
  it('assigns roles by position, rank and dtype', () => {
    expect(classifyInputs([f([2, 3, 4])], 'l')).toEqual(['query']);
    expect(classifyInputs([f([2, 3, 4]), f([2, 5, 4])], 'l')).toEqual(['query', 'value']);
    expect(
      classifyInputs([f([2, 3, 4]), f([2, 5, 4]), f([2, 5, 6]), {shape: [2], dtype: 'int32'}], 'l'),
    ).toEqual(['query', 'value', 'key', 'validLens']);
    expect(
      classifyInputs(
        [f([2, 3, 4]), {shape: [2, 3, 3], dtype: 'bool'}, {shape: [2, 3], dtype: 'int32'}],
        'l',
      ),
    ).toEqual(['query', 'attentionMask', 'validLens']);
  });

  it('tells a mask from a key by shape when no dtype is known (computeOutputShape)', () => {
    // value [2, 5, 4]: a third input [2, 3, 5] cannot be its key, so it is the mask
    expect(
      classifyInputs([{shape: [2, 3, 4]}, {shape: [2, 5, 4]}, {shape: [2, 3, 5]}], 'l'),
    ).toEqual(['query', 'value', 'attentionMask']);
    expect(
      classifyInputs([{shape: [2, 3, 4]}, {shape: [2, 5, 4]}, {shape: [2, 5, 7]}], 'l'),
    ).toEqual(['query', 'value', 'key']);
  });

  it('refuses a float tensor after the key or after a mask, pointing to the attentionMask option', () => {
    const four = [f([2, 3, 4]), f([2, 3, 4]), f([2, 3, 4]), f([2, 3, 3])];
    expect(() => classifyInputs(four, "Layer 'l'")).toThrow(
      /received 4 inputs, input 3 being a float32 tensor of rank 3.*'attentionMask' call option/,
    );
    const afterMask = [f([2, 3, 4]), {shape: [2, 3, 3], dtype: 'bool'}, f([2, 3, 4])];
    expect(() => classifyInputs(afterMask, "Layer 'l'")).toThrow(/input 2 being a float32 tensor/);
  });

  it('uses recorded roles when their count matches, and the options of the call', () => {
    const spec = resolveCall(
      [f([2, 3, 4]), f([2, 3, 3])],
      {useCausalMask: true, returnAttentionScores: true, training: true},
      {...settings, inputRoles: ['query', 'attentionMask']},
    );
    expect(spec.roles).toEqual(['query', 'attentionMask']);
    expect(spec.parts.attentionMask?.shape).toEqual([2, 3, 3]);
    expect(spec.parts.value.shape).toEqual([2, 3, 4]);
    expect([spec.useCausalMask, spec.returnAttentionScores, spec.training]).toEqual([
      true,
      true,
      true,
    ]);
    const plain = resolveCall(
      [f([2, 3, 4]), f([2, 5, 4])],
      {},
      {...settings, inputRoles: ['query']},
    );
    expect(plain.roles).toEqual(['query', 'value']);
    expect([plain.useCausalMask, plain.returnAttentionScores, plain.training]).toEqual([
      false,
      false,
      false,
    ]);
  });

  it('refuses unknown call options, naming the camelCase one for known spellings', () => {
    const x = [f([2, 3, 4])];
    for (const [given, meant] of [
      ['valid_lens', 'validLens'],
      ['validLength', 'validLens'],
      ['use_causal_mask', 'useCausalMask'],
      ['attention_mask', 'attentionMask'],
      ['return_attention_scores', 'returnAttentionScores'],
    ]) {
      expect(() => resolveCall(x, {[given]: 1}, settings)).toThrow(
        new RegExp(
          `unknown call option '${given}'; did you mean '${meant}'\\?.*Accepted options: validLens`,
        ),
      );
    }
    expect(() => resolveCall(x, {frobnicate: true}, settings)).toThrow(
      /unknown call option 'frobnicate'\. Accepted options: validLens, attentionMask, useCausalMask/,
    );
  });

  it('drops repeated inputs (symbolic [x, x], [q, v, v]) with their roles', () => {
    const [x, v, k] = ['x', 'v', 'k'];
    expect(dedupeInputs([x, x], ['query', 'value'])).toEqual({inputs: [x], roles: ['query']});
    expect(dedupeInputs([x, v, v], ['query', 'value', 'key'])).toEqual({
      inputs: [x, v],
      roles: ['query', 'value'],
    });
    expect(dedupeInputs([x, x, x], ['query', 'value', 'key']).inputs).toEqual([x]);
    // [x, x, k]: the value stays, or the key would become the value
    expect(dedupeInputs([x, x, k], ['query', 'value', 'key']).inputs).toEqual([x, x, k]);
  });
});

describe('the calling convention on the layers', () => {
  const layers = () => [
    new MultiHeadAttention({numHeads: 2, keyDim: 2}),
    new Attention(),
    new AdditiveAttention(),
  ];

  it('computeOutputShape accepts [query, value, mask] shapes, as apply does', () => {
    for (const layer of layers()) {
      const shape = layer.computeOutputShape([
        [2, 3, 4],
        [2, 5, 4],
        [2, 3, 5],
      ]);
      expect(shape).toEqual([2, 3, 4]);
      const y = tf.tidy(() =>
        (
          layer.apply([
            tf.ones([2, 3, 4]),
            tf.ones([2, 5, 4]),
            tf.ones([2, 3, 5], 'bool'),
          ]) as tf.Tensor
        ).clone(),
      );
      expect(y.shape).toEqual(shape);
      y.dispose();
    }
  });

  it('refuses a float mask passed positionally, and counts the inputs it received', () => {
    for (const layer of layers()) {
      tf.tidy(() => {
        const x = tf.ones([2, 3, 4]);
        expect(() => layer.apply([x, x, x, tf.ones([2, 3, 3])])).toThrow(
          /received 4 inputs.*float mask as the 'attentionMask' call option/,
        );
        expect(() => layer.apply([x, x, x, x, x])).toThrow(/received 5 inputs/);
      });
    }
  });

  it('refuses misspelled options instead of ignoring them', () => {
    for (const layer of layers()) {
      tf.tidy(() => {
        const x = tf.ones([2, 3, 4]);
        const lens = tf.tensor1d([1, 2], 'int32');
        expect(() => layer.apply(x, {validLength: lens})).toThrow(/did you mean 'validLens'/);
        expect(() => layer.apply(x, {valid_lens: lens})).toThrow(/did you mean 'validLens'/);
        expect(() => layer.apply(x, {use_causal_mask: true})).toThrow(
          /did you mean 'useCausalMask'/,
        );
      });
    }
    // and in functional models too
    const input = tf.input({shape: [3, 4]});
    expect(() =>
      new MultiHeadAttention({numHeads: 1, keyDim: 2}).apply(input, {causal: true}),
    ).toThrow(/did you mean 'useCausalMask'/);
  });
});
