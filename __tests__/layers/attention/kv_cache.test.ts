/**
 * Cached decoding (keras-hub's convention): a causal layer run token by token with a key / value
 * cache gives what it gives on the whole sequence at once, for MultiHeadAttention and
 * GroupQueryAttention, with prefills, sliding windows and lengths; the cache holds the projected
 * keys and values in keras-hub's layout; misuse is refused. Tolerance 1e-5 (abs and rel).
 */
import * as tf from '@tensorflow/tfjs';

import {
  Attention,
  CachedMultiHeadAttention,
  GroupQueryAttention,
  MultiHeadAttention,
} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {randTensor} from '../../helpers/data';

const TOL = 1e-5;
type Layer = MultiHeadAttention | GroupQueryAttention;

function makeLayer(kind: 'mha' | 'gqa', extra: Record<string, unknown>, x: tf.Tensor): Layer {
  const layer =
    kind === 'mha'
      ? new MultiHeadAttention({numHeads: 2, keyDim: 3, useCausalMask: true, ...extra})
      : new GroupQueryAttention({
          headDim: 3,
          numQueryHeads: 4,
          numKeyValueHeads: 2,
          useCausalMask: true,
          ...extra,
        });
  layer.apply(x);
  layer.setWeights(layer.getWeights().map((w, i) => randTensor(w.shape, 40 + i, 0.5)));
  return layer;
}

/** Runs `x` through the layer in chunks (first chunk = prefill), threading the cache. */
function decode(layer: Layer, x: tf.Tensor, chunks: number[], cacheHeads: number): tf.Tensor {
  const [B, T] = x.shape;
  let cache = tf.zeros([B, 2, T, cacheHeads, 3]);
  const outs: tf.Tensor[] = [];
  let start = 0;
  for (const n of chunks) {
    const xs = tf.slice(x, [0, start, 0], [B, n, x.shape[2] as number]);
    const [y, next] = layer.apply(xs, {cache, cacheUpdateIndex: start}) as tf.Tensor[];
    expect(next.shape).toEqual(cache.shape);
    cache = next;
    outs.push(y);
    start += n;
  }
  return tf.concat(outs, 1);
}

describeBackends('key / value cache', () => {
  for (const kind of ['mha', 'gqa'] as const) {
    const heads = kind === 'mha' ? 2 : 2; // MHA: 2 heads; GQA: 2 key / value heads
    for (const [name, extra, chunks] of [
      ['token by token', {}, [1, 1, 1, 1, 1, 1]],
      ['prefill 3, then tokens', {}, [3, 1, 1, 1]],
      ['sliding window 2', {slidingWindow: 2}, [2, 1, 1, 1, 1]],
    ] as Array<[string, Record<string, unknown>, number[]]>) {
      it(`${kind}: cached decoding = the whole causal sequence (${name})`, () => {
        tf.tidy(() => {
          const x = randTensor([2, 6, 5], 1);
          const layer = makeLayer(kind, extra, x);
          const whole = layer.apply(x) as tf.Tensor;
          expectClose(decode(layer, x, chunks, heads), whole, TOL, TOL);
        });
      });
    }
  }

  it('the cache holds the projected keys and values at their positions', () => {
    tf.tidy(() => {
      const x = randTensor([1, 4, 5], 2);
      const layer = makeLayer('mha', {}, x) as MultiHeadAttention;
      const cache0 = tf.fill([1, 2, 4, 2, 3], 7);
      const [, cache] = layer.apply(tf.slice(x, [0, 1, 0], [1, 2, 5]), {
        cache: cache0,
        cacheUpdateIndex: 1,
      }) as tf.Tensor[];
      const c = cache.arraySync() as number[][][][][];
      const k = layer.keyDense!.apply(tf.slice(x, [0, 1, 0], [1, 2, 5])) as tf.Tensor;
      const v = layer.valueDense!.apply(tf.slice(x, [0, 1, 0], [1, 2, 5])) as tf.Tensor;
      // positions 0 and 3 untouched, 1 and 2 hold this call's keys (index 0) and values (index 1)
      for (const kv of [0, 1]) {
        expect(c[0][kv][0].flat()).toEqual(new Array(6).fill(7));
        expect(c[0][kv][3].flat()).toEqual(new Array(6).fill(7));
      }
      expectClose(tf.tensor(c[0][0].slice(1, 3)), tf.squeeze(k, [0]), 1e-6, 1e-6);
      expectClose(tf.tensor(c[0][1].slice(1, 3)), tf.squeeze(v, [0]), 1e-6, 1e-6);
    });
  });

  it('refuses misuse with errors that say what to do', () => {
    tf.tidy(() => {
      const x = randTensor([1, 3, 5], 3);
      const mha = makeLayer('mha', {}, x);
      expect(() => mha.apply(x, {cacheUpdateIndex: 0})).toThrow(
        'cacheUpdateIndex was given without a cache',
      );
      expect(() => mha.apply(x, {cache: tf.zeros([1, 2, 2, 2, 3]), cacheUpdateIndex: 0})).toThrow(
        /cacheUpdateIndex 0 plus 3 new positions exceeds the cache's length 2/,
      );
      expect(() => mha.apply(x, {cache: tf.zeros([1, 2, 4, 3, 3]), cacheUpdateIndex: 0})).toThrow(
        /the cache holds 3 heads of 3 features/,
      );
      expect(() => mha.apply(x, {cache: tf.zeros([1, 4, 3]), cacheUpdateIndex: 0})).toThrow(
        /expected a cache of shape \[1, 2, maxLength, heads, headDim\]/,
      );
      expect(() => new Attention().apply(x, {cache: tf.zeros([1, 2, 4, 2, 3])})).toThrow(
        /unknown call option 'cache'/,
      );
    });
    const input = tf.input({shape: [3, 5]});
    expect(() =>
      new MultiHeadAttention({numHeads: 2, keyDim: 3}).apply(input, {
        cache: tf.zeros([1, 2, 3, 2, 3]),
      }),
    ).toThrow(/a key \/ value cache works in eager calls/);
  });

  for (const dtype of ['int32', 'bool'] as const) {
    it(`refuses ${dtype === 'int32' ? 'an' : 'a'} ${dtype} cache (it would truncate keys and values), for MHA and GQA`, () => {
      tf.tidy(() => {
        const x = randTensor([1, 3, 5], 3);
        for (const kind of ['mha', 'gqa'] as const) {
          const layer = makeLayer(kind, {}, x);
          const cache = tf.zeros([1, 2, 4, 2, 3], dtype);
          for (const index of [0, undefined]) {
            expect(() => layer.apply(x, {cache, cacheUpdateIndex: index})).toThrow(
              new RegExp(
                `expected a float32 cache \\(keys and values\\), received ${dtype} of shape \\[1, 2, 4, 2, 3\\]`,
              ),
            );
          }
        }
      });
    });
  }

  it('checks the cache against the layer without an index too: [batch, 2, maxLength, kvHeads, headDim]', () => {
    tf.tidy(() => {
      const x = randTensor([1, 1, 5], 3);
      const mha = makeLayer('mha', {}, x); // 2 heads of 3
      const gqa = makeLayer('gqa', {}, x); // 4 query heads over 2 key / value heads of 3
      // 4 heads where the layer has 2: was tfjs' "Size(120) must match the product of shape ..."
      for (const layer of [mha, gqa]) {
        expect(() => layer.apply(x, {cache: tf.zeros([1, 2, 5, 4, 3])})).toThrow(
          /expected a cache of shape \[1, 2, maxLength, heads, headDim\] with 2 key \/ value heads of 3 features \(this layer's\), received \[1, 2, 5, 4, 3\]/,
        );
        expect(() => layer.apply(x, {cache: tf.zeros([1, 2, 5, 2, 4])})).toThrow(
          /with 2 key \/ value heads of 3 features.*received \[1, 2, 5, 2, 4\]; the cache holds 2 heads of 4 features/,
        );
      }
      // GQA's cache holds its key / value heads, not its query heads
      expect(() => gqa.apply(x, {cache: tf.zeros([1, 2, 5, 4, 3]), cacheUpdateIndex: 0})).toThrow(
        /with 2 key \/ value heads/,
      );
    });
  });

  it('gqa: cached decoding attends to the cache without copying keys and values per query head', async () => {
    const x = randTensor([1, 1, 5], 3);
    const gqa = makeLayer('gqa', {}, x);
    const cache = randTensor([1, 2, 6, 2, 3], 9);
    const info = await tf.profile(() => gqa.apply(x, {cache, cacheUpdateIndex: 2}) as tf.Tensor[]);
    tf.dispose(info.result as tf.Tensor[]);
    // no key / value head repeated (tfjs-node's `where` tiles the [.., 6] mask, not the cache)
    const tiledCache = info.kernels.filter(
      (k) => k.name === 'Tile' && k.inputShapes.some((s) => s?.includes(6) && s?.includes(3)),
    );
    expect(tiledCache.map((k) => k.inputShapes)).toEqual([]);
    // the attention products take the 2 key / value heads, not 4 repeated ones
    const products = info.kernels.filter(
      (k) => k.name === 'BatchMatMul' || k.name.includes('MatMul'),
    );
    expect(products.length).toBeGreaterThan(0);
    const keyProduct = products.find((k) =>
      k.inputShapes.some((s) => s?.[1] === 6 && s?.[2] === 3),
    );
    expect(keyProduct?.inputShapes[1]).toEqual([2, 6, 3]);
    tf.dispose([x, cache]);
    gqa.dispose();
  });
});

describeBackends('the cache written by one scatter', () => {
  it("a gradient through a cached call at the cache's last row (batch 2) is the whole sequence's", () => {
    const [B, T, D] = [2, 5, 6];
    const cached = new CachedMultiHeadAttention({numHeads: 2, keyDim: 3});
    const plain = new MultiHeadAttention({numHeads: 2, keyDim: 3});
    const x = randTensor([B, T, D], 21);
    const c = randTensor([B, 1, D], 22);
    const before = tf.memory().numTensors;
    tf.tidy(() => {
      cached.apply(x);
      plain.apply(x);
      cached.setWeights(cached.getWeights().map((w, i) => randTensor(w.shape, 80 + i, 0.5)));
      plain.setWeights(cached.getWeights());
      const causal = tf.linalg.bandPart(tf.ones([T, T]), -1, 0);
      // the keys and values of positions 0 .. T - 2, then the last position's call (index T - 1)
      let cache = tf.zeros([B, 2, T, 2, 3]);
      for (let t = 0; t < T - 1; t++) {
        const [, next] = cached.apply(tf.slice(x, [0, t, 0], [B, 1, D]), {
          cache,
          cacheUpdateIndex: t,
        }) as tf.Tensor[];
        cache = next;
      }
      const last = tf.tile(tf.slice(causal, [T - 1, 0], [1, T]).expandDims(0), [B, 1, 1]);
      const xt = tf.slice(x, [0, T - 1, 0], [B, 1, D]);
      const cachedGrad = tf.grad((q: tf.Tensor) => {
        const [y] = cached.apply(q, {
          attentionMask: last,
          cache,
          cacheUpdateIndex: T - 1,
        }) as tf.Tensor[];
        return tf.sum(tf.mul(y, c));
      })(xt);
      // the reference: the uncached layer over the whole sequence (causal), its last row; only
      // the last position's query, key and value depend on x[:, T - 1]
      const wholeGrad = tf.grad((whole: tf.Tensor) => {
        const y = plain.apply(whole, {
          attentionMask: tf.tile(tf.expandDims(causal, 0), [B, 1, 1]),
        }) as tf.Tensor;
        return tf.sum(tf.mul(tf.slice(y, [0, T - 1, 0], [B, 1, D]), c));
      })(x);
      expectClose(cachedGrad, tf.slice(wholeGrad, [0, T - 1, 0], [B, 1, D]), 1e-5, 1e-5);
    });
    expect(tf.memory().numTensors - before).toBe(cached.weights.length + plain.weights.length);
    cached.dispose();
    plain.dispose();
  });
});
