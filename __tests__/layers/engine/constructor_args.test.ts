/**
 * Constructor options are checked as call options are (README: unknown options are errors): an
 * option a layer does not have is an error naming it, a snake_case spelling of one it has names
 * the camelCase option, and the layer is never built silently without it.
 */
import {
  AdditiveAttention,
  Attention,
  CachedMultiHeadAttention,
  DotProductAttention,
  EinsumDense,
  GetItem,
  GroupQueryAttention,
  MultiHeadAttention,
  RotaryEmbedding,
  TransformerDecoder,
} from '../../../src';

type Ctor = new (args: Record<string, unknown>) => unknown;
const make = (cls: unknown, args: Record<string, unknown>) => () => new (cls as Ctor)(args);

describe('constructor options', () => {
  it('a snake_case option names the camelCase one (the layer is not built non-causal)', () => {
    expect(make(MultiHeadAttention, {numHeads: 2, keyDim: 4, use_causal_mask: true})).toThrow(
      "MultiHeadAttention: unknown option 'use_causal_mask'; did you mean 'useCausalMask'? " +
        '(options are camelCase)',
    );
    expect(make(Attention, {use_scale: true})).toThrow(
      "Attention: unknown option 'use_scale'; did you mean 'useScale'?",
    );
    expect(
      make(GroupQueryAttention, {
        headDim: 2,
        numQueryHeads: 2,
        numKeyValueHeads: 1,
        num_key_value_heads: 1,
      }),
    ).toThrow(
      "GroupQueryAttention: unknown option 'num_key_value_heads'; did you mean 'numKeyValueHeads'?",
    );
    expect(make(RotaryEmbedding, {max_wavelength: 10})).toThrow(
      "RotaryEmbedding: unknown option 'max_wavelength'; did you mean 'maxWavelength'?",
    );
    expect(
      make(TransformerDecoder, {intermediateDim: 4, numHeads: 2, layer_norm_epsilon: 1e-3}),
    ).toThrow(
      "TransformerDecoder: unknown option 'layer_norm_epsilon'; did you mean 'layerNormEpsilon'?",
    );
  });

  it('an option the layer does not have is an error naming it and the options', () => {
    expect(make(MultiHeadAttention, {numHeads: 2, keyDim: 4, causal: true})).toThrow(
      /^MultiHeadAttention: unknown option 'causal' = true; expected one of .*\bkeyDim\b.*\buseCausalMask\b/,
    );
    expect(make(CachedMultiHeadAttention, {numHeads: 2, keyDim: 4, causal: true})).toThrow(
      /^CachedMultiHeadAttention: unknown option 'causal' = true/,
    );
    expect(make(AdditiveAttention, {useScale: true, units: 3})).toThrow(
      /^AdditiveAttention: unknown option 'units' = 3; expected one of .*\bnumHiddens\b/,
    );
    expect(make(DotProductAttention, {useScale: true})).toThrow(
      /^DotProductAttention: unknown option 'useScale' = true/,
    );
    expect(make(EinsumDense, {equation: 'ab,bc->ac', outputShape: 3, bias: 'c'})).toThrow(
      /^EinsumDense: unknown option 'bias' = "c"; expected one of .*\bbiasAxes\b/,
    );
    expect(make(GetItem, {index: [0], axis: 1})).toThrow(/^GetItem: unknown option 'axis' = 1/);
  });

  it('accepts every option a layer serializes, tfjs layer options, and unset values', () => {
    expect(
      new MultiHeadAttention({
        numHeads: 2,
        keyDim: 4,
        useCausalMask: true,
        name: 'mha',
        trainable: false,
        dtype: 'float32',
        causal: null,
        slidingWindow: undefined,
      } as never).useCausalMask,
    ).toBe(true);
    expect(new Attention({useScale: true, scoreMode: 'concat'}).useScale).toBe(true);
    expect(new AdditiveAttention({numHiddens: 3}).numHiddens).toBe(3);
    expect(new DotProductAttention({dropout: 0.1}).dropout).toBe(0.1);
    // and what a layer serializes comes back through its constructor
    const mha = new MultiHeadAttention({numHeads: 2, keyDim: 4, useGate: true, chunkSize: 8});
    const again = new MultiHeadAttention(mha.getConfig() as never);
    expect(again.getConfig()).toEqual(mha.getConfig());
  });
});
