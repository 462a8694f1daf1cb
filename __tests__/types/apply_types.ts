// Compiled by __tests__/public_api_types.test.ts with `tsc --noEmit --strict` against the built
// declarations (dist/index.d.ts): what the typed `apply` overloads promise to users. Never run.
// Each `@ts-expect-error` line must be an error, or tsc reports the directive as unused.
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import {
  AdditiveAttention,
  Attention,
  CachedMultiHeadAttention,
  DotProductAttention,
  EinsumDense,
  fileSystem,
  GetItem,
  layers,
  GroupQueryAttention,
  MultiHeadAttention,
  PositionEmbedding,
  ReversibleEmbedding,
  RotaryEmbedding,
  SinePositionEncoding,
  TokenAndPositionEmbedding,
  TransformerDecoder,
  TransformerEncoder,
} from 'tfjs-attention';

declare const q: tf.Tensor;
declare const v: tf.Tensor;
declare const lens: tf.Tensor;
declare const flag: boolean;
declare const artifactsIn: tf.io.ModelArtifacts;

// eager: a tensor in, a tensor out; returnAttentionScores: a typed pair
const [y, w] = new Attention({useScale: true}).apply([q, v], {returnAttentionScores: true});
const sum: tf.Tensor = tf.add(y, tf.sum(w));
const out: tf.Tensor = new MultiHeadAttention({numHeads: 2, keyDim: 4}).apply(q);
const d2l: tf.Tensor = new DotProductAttention().apply([q, v, v], {validLens: lens});
const add: tf.Tensor = new AdditiveAttention({numHiddens: 8}).apply([q, v]);
const gqa = new GroupQueryAttention({headDim: 4, numQueryHeads: 4, numKeyValueHeads: 2});
const [g, gScores] = gqa.apply(q, {useCausalMask: true, returnAttentionScores: true});
out.dispose();
d2l.dispose();
add.dispose();
sum.dispose();
g.dispose();
gScores.dispose();

// a layer constructed with returnAttentionScores: true returns pairs from every call
const [a, aScores] = new Attention({returnAttentionScores: true}).apply([q, v]);
a.dispose();
aScores.dispose();
const single: tf.Tensor = new Attention({returnAttentionScores: true}).apply([q, v], {
  returnAttentionScores: false,
});
single.dispose();
// not known at compile time: either
const either = new Attention({returnAttentionScores: flag}).apply([q, v]);
if (Array.isArray(either)) either[1].dispose();
// @ts-expect-error a pair (or a tensor) is not a tensor
const notATensor: tf.Tensor = either;
// @ts-expect-error a layer constructed with scores returns a pair, not a tensor
const alsoNot: tf.Tensor = new Attention({returnAttentionScores: true}).apply([q, v]);

// the tf.layers-style factories keep the constructor's typing
const [fa, fScores] = layers.attention({returnAttentionScores: true}).apply([q, v]);
const fOut: tf.Tensor = layers.multiHeadAttention({numHeads: 2, keyDim: 4}).apply(q);
for (const t of [fa, fScores, fOut]) t.dispose();
// @ts-expect-error the factory's layer with scores returns a pair
const fWrong: tf.Tensor = layers.additiveAttention({returnAttentionScores: true}).apply([q, v]);
void fWrong;

// a cache call: [output, cache]; with scores [output, scores, cache]
const cached = new CachedMultiHeadAttention({numHeads: 2, keyDim: 4});
const [step, cache] = cached.apply(q, {cache: tf.zeros([1, 2, 8, 2, 4]), cacheUpdateIndex: 0});
const [s2, sc2, c2] = cached.apply(q, {cache, cacheUpdateIndex: 1, returnAttentionScores: true});
step.dispose();
s2.dispose();
sc2.dispose();
c2.dispose();
// @ts-expect-error a cache call returns a pair, not a tensor
const stepOnly: tf.Tensor = cached.apply(q, {cache, cacheUpdateIndex: 1});

// symbolic: SymbolicTensor in, SymbolicTensor out, usable in tf.model
const input = tfl.input({shape: [5, 8]});
const h: tfl.SymbolicTensor = new MultiHeadAttention({numHeads: 2, keyDim: 4}).apply(input);
const [ctx, scores] = new Attention().apply([h, input], {returnAttentionScores: true});
const encoded: tfl.SymbolicTensor = new TransformerEncoder({
  intermediateDim: 16,
  numHeads: 2,
}).apply(ctx);
const decoded: tfl.SymbolicTensor = new TransformerDecoder({
  intermediateDim: 16,
  numHeads: 2,
}).apply(encoded);
const model = tfl.model({inputs: input, outputs: [decoded, scores]});
model.summary();
// @ts-expect-error a symbolic result is not a tf.Tensor
const wrong: tf.Tensor = new MultiHeadAttention({numHeads: 2, keyDim: 4}).apply(input);
// @ts-expect-error nor is a symbolic pair a pair of tensors
const wrongPair: [tf.Tensor, tf.Tensor] = new Attention().apply([input, input], {
  returnAttentionScores: true,
});

// TransformerEncoder / TransformerDecoder: eager results and their pairs
const encoder = new TransformerEncoder({intermediateDim: 16, numHeads: 2});
const e: tf.Tensor = encoder.apply(q);
const [e2, eScores] = encoder.apply(q, {returnAttentionScores: true});
const decoder = new TransformerDecoder({intermediateDim: 16, numHeads: 2});
const dOut: tf.Tensor = decoder.apply(q);
const [dStep, dCache] = decoder.apply(q, {
  selfAttentionCache: tf.zeros([1, 2, 8, 2, 4]),
  selfAttentionCacheUpdateIndex: 0,
});
// @ts-expect-error a cached decoder call returns a pair
const dWrong: tf.Tensor = decoder.apply(q, {selfAttentionCache: dCache});
for (const t of [e, e2, eScores, dOut, dStep]) t.dispose();

// the other layers: a tensor in, a tensor out; symbolic in, symbolic out
const ids = tfl.input({shape: [5], dtype: 'int32'});
const embedded: tfl.SymbolicTensor = new TokenAndPositionEmbedding({
  vocabularySize: 10,
  sequenceLength: 5,
  embeddingDim: 8,
}).apply(ids);
const rotated: tf.Tensor = new RotaryEmbedding().apply(q);
const encoding: tf.Tensor = new SinePositionEncoding().apply(q);
const positions: tf.Tensor = new PositionEmbedding({sequenceLength: 8}).apply(q);
const projected: tf.Tensor = new EinsumDense({
  equation: 'abc,cd->abd',
  outputShape: [null, 4],
}).apply(q);
const sliced: tfl.SymbolicTensor = new GetItem({
  index: [{start: null, stop: null, step: null}, 0],
}).apply(embedded);
const logits: tf.Tensor = new ReversibleEmbedding({inputDim: 10, outputDim: 4}).apply(q, {
  reverse: true,
});
// @ts-expect-error a symbolic embedding is not a tf.Tensor
const notEager: tf.Tensor = new SinePositionEncoding().apply(embedded);
for (const t of [rotated, encoding, positions, projected, logits]) t.dispose();
void [sliced, notEager];

// fileSystem(): save and load are always there
async function roundTrip(m: tfl.LayersModel): Promise<void> {
  const handler = fileSystem('/tmp/model');
  const saved: tf.io.SaveResult = await handler.save(artifactsIn);
  const artifacts: tf.io.ModelArtifacts = await handler.load();
  await m.save(fileSystem('/tmp/model-copy'));
  console.log(saved, artifacts);
}
void roundTrip;
void [notATensor, alsoNot, stepOnly, wrong, wrongPair, dWrong];
