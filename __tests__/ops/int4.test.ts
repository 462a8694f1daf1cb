/**
 * Keras 3.15's int4 arithmetic (src/ops/int4.ts) against Keras' own outputs
 * (fixtures/int4_ops.py -> __tests__/fixtures/int4/ops.json): grouped asymmetric quantization
 * (the last group padded with zero rows, every value positive or negative, a constant column),
 * its dequantization, per-channel symmetric quantization (an all-zero column), and pack_int4 /
 * unpack_int4 along the output axis (Keras 3.14+), the input axis (3.11-3.13) and a rank-3
 * kernel, odd lengths padded. Values and scales equal exactly (bit for bit).
 */
import * as fs from 'fs';
import * as path from 'path';

import {
  dequantizeInt4Grouped,
  packInt4,
  quantizeInt4Grouped,
  quantizeInt4PerChannel,
  roundHalfEven,
  unpackInt4,
} from '../../src/ops/int4';

interface Grouped {
  k: number;
  n: number;
  block_size: number;
  groups: number;
  kernel: number[];
  q: number[];
  scale: number[];
  zero: number[];
  g_idx: number[];
  dequantized: number[];
}
interface PerChannel {
  k: number;
  n: number;
  kernel: number[];
  q: number[];
  scale: number[];
}
interface Pack {
  shape: number[];
  axis: number;
  values: number[];
  packed: number[];
  packed_shape: number[];
}
const fixture = JSON.parse(
  fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'int4', 'ops.json'), 'utf8'),
) as {grouped: Grouped[]; per_channel: PerChannel[]; pack: Pack[]};

/** The values as float32 (JSON holds the float32 values as doubles). */
const f32 = (a: number[]) => Array.from(new Float32Array(a));

describe('roundHalfEven (numpy.round)', () => {
  it('rounds halves to the even neighbour and the rest to the nearest', () => {
    expect([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6, 3].map(roundHalfEven)).toEqual([
      0, 2, 2, -0, -2, -2, 2, -3, 3,
    ]);
  });
});

describe('quantizeInt4Grouped / dequantizeInt4Grouped', () => {
  it.each(fixture.grouped.map((c) => [`k ${c.k}, n ${c.n}, block ${c.block_size}`, c] as const))(
    "%s: Keras' values, scales, zero points and group indices, and its dequantized kernel, exactly",
    (_, c) => {
      const g = quantizeInt4Grouped(c.kernel, c.k, c.n, c.block_size);
      expect(Array.from(g.q)).toEqual(c.q);
      expect(Array.from(g.zero)).toEqual(c.zero);
      expect(Array.from(g.scale)).toEqual(f32(c.scale));
      expect(Array.from(g.gIdx)).toEqual(c.g_idx);
      expect(g.scale.length).toBe(c.groups * c.n);
      expect(Array.from(dequantizeInt4Grouped(g, c.k, c.n))).toEqual(f32(c.dequantized));
    },
  );

  it('the zero points matter: without them the dequantized kernel is far from Keras', () => {
    const c = fixture.grouped[1]; // every value positive: zero points at -8
    const g = quantizeInt4Grouped(c.kernel, c.k, c.n, c.block_size);
    const without = dequantizeInt4Grouped({...g, zero: new Int8Array(g.zero.length)}, c.k, c.n);
    const worst = Math.max(...Array.from(without, (v, i) => Math.abs(v - c.dequantized[i])));
    expect(worst).toBeGreaterThan(0.1);
  });

  it('refuses a kernel whose size is not k * n, and a block size that is not a positive integer', () => {
    expect(() => quantizeInt4Grouped([1, 2, 3], 2, 2, 1)).toThrow(
      'quantizeInt4Grouped: expected a kernel of k * n values with k, n positive integers, received 3 values for k=2, n=2',
    );
    expect(() => quantizeInt4Grouped([1, 2, 3, 4], 2, 2, 0)).toThrow(
      'quantizeInt4Grouped: expected blockSize to be a positive integer, received 0',
    );
  });
});

describe('quantizeInt4PerChannel', () => {
  it.each(fixture.per_channel.map((c) => [`k ${c.k}, n ${c.n}`, c] as const))(
    "%s: Keras' values and scales exactly (an all-zero column: 7 / epsilon)",
    (_, c) => {
      const {q, scale} = quantizeInt4PerChannel(c.kernel, c.k, c.n);
      expect(Array.from(q)).toEqual(c.q);
      expect(Array.from(scale)).toEqual(f32(c.scale));
    },
  );
});

describe('packInt4 / unpackInt4', () => {
  it.each(fixture.pack.map((c) => [`[${c.shape.join(', ')}] along axis ${c.axis}`, c] as const))(
    "%s: Keras' bytes and shape, and back",
    (_, c) => {
      const {packed, shape} = packInt4(c.values, c.shape, c.axis);
      expect(shape).toEqual(c.packed_shape);
      expect(Array.from(packed)).toEqual(c.packed);
      const along = c.shape[c.axis < 0 ? c.axis + c.shape.length : c.axis];
      expect(Array.from(unpackInt4(c.packed, c.packed_shape, along, c.axis))).toEqual(c.values);
    },
  );

  it('puts the even index in the low nibble (-8 low, 7 high: 0x78)', () => {
    expect(Array.from(packInt4([-8, 7], [2], 0).packed)).toEqual([0x78]);
    expect(Array.from(unpackInt4([0x78], [1], 2, 0))).toEqual([-8, 7]);
    expect(Array.from(unpackInt4([-1], [1], 1, 0))).toEqual([-1]); // 0xff: -1, padding dropped
  });

  it('refuses values outside [-8, 7], a wrong count, a bad axis and a length the bytes cannot hold', () => {
    expect(() => packInt4([8, 0], [2], 0)).toThrow(
      'packInt4: expected int4 values in [-8, 7], received 8 at flat index 0',
    );
    expect(() => packInt4([1, 2, 3], [2, 2], 0)).toThrow(
      'packInt4: expected 4 values for shape [2, 2], received 3',
    );
    expect(() => packInt4([1, 2], [2], 1)).toThrow(
      'packInt4: expected an axis of a rank-1 array, received 1',
    );
    expect(() => unpackInt4([1, 2], [2], 5, 0)).toThrow(
      'unpackInt4: expected 3 or 4 values along axis 0 of a packed axis of 2, received 5',
    );
  });
});
