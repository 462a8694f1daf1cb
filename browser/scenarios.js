// Numeric scenarios run identically in the browser (on webgl, webgpu and cpu) and in Node (cpu), so
// the browser results can be compared with Node's. Each returns plain arrays. Loaded as a
// <script> (defines globalThis.scenarios) and with require() in Node.
(function (root, factory) {
  if (typeof module === 'object' && module.exports) module.exports = factory();
  else root.scenarios = factory();
})(typeof self !== 'undefined' ? self : this, function () {
  function values(n, seed, scale) {
    const out = new Float32Array(n);
    let s = seed >>> 0;
    for (let i = 0; i < n; i++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      out[i] = (s / 2 ** 31 - 1) * (scale === undefined ? 1 : scale);
    }
    return out;
  }
  function rand(tf, shape, seed, scale) {
    return tf.tensor(
      values(
        shape.reduce((a, b) => a * b, 1),
        seed,
        scale,
      ),
      shape,
    );
  }
  function setRandomWeights(tf, layer, seed) {
    layer.setWeights(layer.getWeights().map((w, i) => rand(tf, w.shape, seed + i, 0.5)));
  }
  async function arrays(ts) {
    return Promise.all(ts.map((t) => t.array()));
  }

  const numeric = {
    // MultiHeadAttention with valid lengths (including 0) and a causal mask, returned scores
    async mhaMasked(tf, A) {
      const layer = new A.MultiHeadAttention({numHeads: 2, keyDim: 4, useCausalMask: true});
      const x = rand(tf, [2, 6, 8], 1);
      const m = rand(tf, [2, 7, 8], 2);
      layer.apply([x, m]);
      setRandomWeights(tf, layer, 10);
      const out = layer.apply([x, m], {
        validLens: tf.tensor1d([4, 0], 'int32'),
        returnAttentionScores: true,
      });
      return arrays(out);
    },
    // per-query lengths and an attention mask over two heads, keys with a separate key tensor
    async mhaCrossMask(tf, A) {
      const layer = new A.MultiHeadAttention({numHeads: 2, keyDim: 3, valueDim: 2, outputShape: 5});
      const q = rand(tf, [2, 3, 4], 3);
      const v = rand(tf, [2, 5, 6], 4);
      const k = rand(tf, [2, 5, 4], 5);
      layer.apply([q, v, k]);
      setRandomWeights(tf, layer, 20);
      const mask = tf.greater(rand(tf, [2, 3, 5], 6), -0.5);
      const lens = tf.tensor2d(
        [
          [5, 1, 3],
          [2, 5, 4],
        ],
        [2, 3],
        'int32',
      );
      return arrays(
        layer.apply([q, v, k], {attentionMask: mask, validLens: lens, returnAttentionScores: true}),
      );
    },
    async dotAdditiveAttention(tf, A) {
      const q = rand(tf, [2, 3, 4], 7);
      const v = rand(tf, [2, 5, 3], 8);
      const k = rand(tf, [2, 5, 4], 9);
      const lens = tf.tensor1d([2, 5], 'int32');
      const dot = new A.DotProductAttention().apply([q, v, k], {validLens: lens});
      const luong = new A.Attention({scoreMode: 'concat', useScale: true});
      luong.apply([q, v, k]);
      setRandomWeights(tf, luong, 30);
      const add = new A.AdditiveAttention({numHiddens: 6});
      add.apply([q, v, k]);
      setRandomWeights(tf, add, 40);
      return arrays([
        dot,
        luong.apply([q, v, k], {validLens: lens}),
        add.apply([q, v, k], {validLens: lens}),
      ]);
    },
    // Inf and NaN in key positions that validLens masks out: outputs as with finite keys there
    async nonFinitePadding(tf, A) {
      const mha = new A.MultiHeadAttention({numHeads: 2, keyDim: 3});
      const q = rand(tf, [2, 3, 4], 15);
      const v = rand(tf, [2, 5, 4], 16);
      const k = rand(tf, [2, 5, 4], 17);
      mha.apply([q, v, k]);
      setRandomWeights(tf, mha, 50);
      // read back asynchronously: on webgpu arraySync goes through a canvas copy, which in
      // headless SwiftShader Chromium can lose the device (see docs/backends.md)
      const bad = await k.array();
      bad[0][3][0] = Infinity;
      bad[0][4][2] = NaN;
      bad[1][4][1] = -Infinity;
      const kBad = tf.tensor(bad);
      const lens = tf.tensor1d([3, 4], 'int32');
      const dot = new A.DotProductAttention();
      return arrays([
        mha.apply([q, v, k], {validLens: lens}),
        mha.apply([q, v, kBad], {validLens: lens}),
        dot.apply([q, v, k], {validLens: lens}),
        dot.apply([q, v, kBad], {validLens: lens}),
      ]);
    },
    // keras-hub's blocks: an encoder with a padding mask, a pre-norm decoder with cross-attention
    // (whole sequence, then cached steps), GroupQueryAttention, RotaryEmbedding, GetItem, and the
    // embedding / position layers
    async transformerBlocks(tf, A) {
      const x = rand(tf, [2, 5, 8], 60);
      const e = rand(tf, [2, 4, 8], 61);
      const enc = new A.TransformerEncoder({intermediateDim: 12, numHeads: 2, activation: 'gelu'});
      enc.apply(x);
      setRandomWeights(tf, enc, 70);
      const padding = tf.tensor2d(
        [
          [1, 1, 1, 0, 0],
          [1, 1, 1, 1, 1],
        ],
        [2, 5],
        'int32',
      );
      const dec = new A.TransformerDecoder({
        intermediateDim: 12,
        numHeads: 2,
        normalizeFirst: true,
        activation: 'geluApproximate',
      });
      dec.apply([x, e]);
      setRandomWeights(tf, dec, 90);
      let cache = tf.zeros([2, 2, 5, 2, 4]);
      let cross = tf.zeros([2, 2, 4, 2, 4]);
      const steps = [];
      for (let t = 0; t < 5; t++) {
        const [y, c, k] = dec.apply([tf.slice(x, [0, t, 0], [2, 1, 8]), e], {
          selfAttentionCache: cache,
          selfAttentionCacheUpdateIndex: t,
          crossAttentionCache: cross,
          crossAttentionCacheUpdateIndex: t === 0 ? 0 : undefined,
        });
        steps.push(y);
        cache = c;
        cross = k;
      }
      const gqa = new A.GroupQueryAttention({
        headDim: 4,
        numQueryHeads: 4,
        numKeyValueHeads: 2,
        useCausalMask: true,
      });
      const rotated = new A.RotaryEmbedding({maxWavelength: 100}).apply(x);
      gqa.apply(rotated);
      setRandomWeights(tf, gqa, 110);
      const first = new A.GetItem({index: [{start: null, stop: null, step: null}, 0]});
      // the position and embedding layers, and CachedMultiHeadAttention with a cache
      const ids = tf.tensor2d(
        [
          [3, 1, 4, 1, 0],
          [5, 9, 2, 6, 5],
        ],
        [2, 5],
        'int32',
      );
      const tpe = new A.TokenAndPositionEmbedding({
        vocabularySize: 10,
        sequenceLength: 6,
        embeddingDim: 8,
        maskZero: true,
      });
      tpe.apply(ids);
      setRandomWeights(tf, tpe, 120);
      const pos = new A.PositionEmbedding({sequenceLength: 7});
      pos.apply(x);
      setRandomWeights(tf, pos, 130);
      const rev = new A.ReversibleEmbedding({inputDim: 10, outputDim: 8, logitSoftCap: 2});
      rev.apply(ids);
      setRandomWeights(tf, rev, 140);
      const cmha = new A.CachedMultiHeadAttention({numHeads: 2, keyDim: 4});
      cmha.apply(x);
      setRandomWeights(tf, cmha, 150);
      const [cached] = cmha.apply(x, {cache: tf.zeros([2, 2, 7, 2, 4]), cacheUpdateIndex: 1});
      return arrays([
        tpe.apply(ids),
        pos.apply(x, {startIndex: 2}),
        new A.SinePositionEncoding({maxWavelength: 50}).apply(x),
        rev.apply(rev.apply(ids), {reverse: true}),
        cached,
        enc.apply(x, {paddingMask: padding}),
        dec.apply([x, e]),
        tf.concat(steps, 1),
        gqa.apply(rotated),
        first.apply(x),
      ]);
    },
    async einsumMaskedSoftmax(tf, A) {
      const a = rand(tf, [2, 3, 4], 11);
      const b = rand(tf, [4, 5], 12);
      const c = rand(tf, [2, 5, 3], 13);
      const s = tf.mul(rand(tf, [2, 3, 6], 14), 20);
      return arrays([
        A.einsum('bij,jk->bik', a, b),
        A.einsum('bij,bki->bjk', a, c),
        A.einsum('bij->j', a),
        A.maskedSoftmax(
          s,
          tf.tensor2d(
            [
              [0, 3, 6],
              [1, 0, 2],
            ],
            [2, 3],
            'int32',
          ),
        ),
      ]);
    },
  };

  return {values, rand, setRandomWeights, numeric};
});
