/**
 * MultiHeadAttention as an ONNX model, written at bench time from the layer's own weights, so
 * onnxruntime runs the same attention as the layer (the anchor of the benchmark).
 *
 * A tiny protobuf writer for the few messages a model needs (ModelProto, GraphProto, NodeProto,
 * AttributeProto, TensorProto, ValueInfoProto; field numbers from onnx/onnx.proto3), so neither
 * Python nor the `onnx` package is needed. Opset 17, IR version 8.
 *
 * The graph, for input x [B, T, D], H heads of width d = D / H, and Keras' weight layout
 * (query/key/value kernels [D, H, d] and biases [H, d], output kernel [H, d, D] and bias [D]):
 *
 *   q = Transpose(Reshape(MatMul(x, Wq) + bq, [B, T, H, d]), [0, 2, 1, 3])   [B, H, T, d]
 *   k = Transpose(Reshape(MatMul(x, Wk) + bk, [B, T, H, d]), [0, 2, 3, 1])   [B, H, d, T]
 *   v = Transpose(Reshape(MatMul(x, Wv) + bv, [B, T, H, d]), [0, 2, 1, 3])   [B, H, T, d]
 *   p = Softmax(MatMul(q, k) * (1 / sqrt(d)) [+ mask], axis 3)               [B, H, T, T]
 *   y = MatMul(Reshape(Transpose(MatMul(p, v), [0, 2, 1, 3]), [B, T, D]), Wo) + bo
 *
 * With `mask`, a second input `mask` [B, 1, 1, T] is added to the scaled scores: 0 for a key
 * that may be attended, -1e9 for one past the valid length ({@link additiveMask}).
 */

/** Protobuf encoding: varints, tags, length-delimited fields. */
class Writer {
  private readonly parts: number[] = [];

  varint(value: number | bigint): this {
    let v = BigInt.asUintN(64, BigInt(value));
    do {
      let byte = Number(v & BigInt(0x7f));
      v >>= BigInt(7);
      if (v !== BigInt(0)) byte |= 0x80;
      this.parts.push(byte);
    } while (v !== BigInt(0));
    return this;
  }

  private tag(field: number, wire: number): this {
    return this.varint((field << 3) | wire);
  }

  int(field: number, value: number): this {
    return this.tag(field, 0).varint(value);
  }

  bytes(field: number, data: Uint8Array): this {
    this.tag(field, 2).varint(data.length);
    for (let i = 0; i < data.length; i++) this.parts.push(data[i]);
    return this;
  }

  string(field: number, s: string): this {
    return this.bytes(field, new TextEncoder().encode(s));
  }

  message(field: number, m: Writer): this {
    return this.bytes(field, m.finish());
  }

  float(field: number, value: number): this {
    this.tag(field, 5);
    const b = new Uint8Array(new Float32Array([value]).buffer);
    for (let i = 0; i < 4; i++) this.parts.push(b[i]);
    return this;
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.parts);
  }
}

const FLOAT = 1; // TensorProto.DataType
const INT64 = 7;

type Attr = {name: string; ints?: number[]; i?: number};

function node(op: string, inputs: string[], outputs: string[], attrs: Attr[] = []): Writer {
  const w = new Writer();
  for (const i of inputs) w.string(1, i);
  for (const o of outputs) w.string(2, o);
  w.string(3, outputs[0]);
  w.string(4, op);
  for (const a of attrs) {
    const m = new Writer().string(1, a.name);
    if (a.ints) {
      for (const v of a.ints) m.int(8, v);
      m.int(20, 7); // AttributeType.INTS
    } else {
      m.int(3, a.i as number);
      m.int(20, 2); // AttributeType.INT
    }
    w.message(5, m);
  }
  return w;
}

function tensor(name: string, dims: number[], data: Float32Array | BigInt64Array): Writer {
  const w = new Writer();
  for (const d of dims) w.int(1, d);
  w.int(2, data instanceof Float32Array ? FLOAT : INT64);
  w.string(8, name);
  // raw_data is little-endian; so are the typed arrays on every platform Node runs on
  return w.bytes(9, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
}

function valueInfo(name: string, dims: number[]): Writer {
  const shape = new Writer();
  for (const d of dims) shape.message(1, new Writer().int(1, d));
  const tensorType = new Writer().int(1, FLOAT).message(2, shape);
  return new Writer().string(1, name).message(2, new Writer().message(1, tensorType));
}

export interface OnnxAttentionSize {
  batch: number;
  tokens: number;
  width: number;
  heads: number;
}

/**
 * The model's bytes. `weights` = MultiHeadAttention.getWeights() data in its order: query kernel
 * and bias, key kernel and bias, value kernel and bias, output kernel and bias (Keras layout,
 * row-major). `scale` multiplies the scores (1 / sqrt(keyDim) unless a test breaks it).
 */
export function attentionModel(
  size: OnnxAttentionSize,
  weights: Float32Array[],
  options: {mask?: boolean; scale?: number} = {},
): Uint8Array {
  const {batch: B, tokens: T, width: D, heads: H} = size;
  const d = D / H;
  if (weights.length !== 8) throw new Error(`expected 8 weight arrays, got ${weights.length}`);
  const [wq, bq, wk, bk, wv, bv, wo, bo] = weights;
  const scale = options.scale ?? 1 / Math.sqrt(d);
  const g = new Writer();
  const nodes: Writer[] = [];
  const heads = (p: string, perm: number[]) => {
    nodes.push(
      node('MatMul', ['x', `W${p}`], [`${p}_mm`]),
      node('Add', [`${p}_mm`, `b${p}`], [`${p}_proj`]),
      node('Reshape', [`${p}_proj`, 'heads_shape'], [`${p}_4d`]),
      node('Transpose', [`${p}_4d`], [`${p}_heads`], [{name: 'perm', ints: perm}]),
    );
  };
  heads('q', [0, 2, 1, 3]); // [B, H, T, d]
  heads('k', [0, 2, 3, 1]); // [B, H, d, T]
  heads('v', [0, 2, 1, 3]); // [B, H, T, d]
  nodes.push(
    node('MatMul', ['q_heads', 'k_heads'], ['scores']),
    node('Mul', ['scores', 'scale'], ['scaled']),
  );
  let logits = 'scaled';
  if (options.mask) {
    nodes.push(node('Add', ['scaled', 'mask'], ['masked']));
    logits = 'masked';
  }
  nodes.push(
    node('Softmax', [logits], ['weights'], [{name: 'axis', i: 3}]),
    node('MatMul', ['weights', 'v_heads'], ['attended']), // [B, H, T, d]
    node('Transpose', ['attended'], ['attended_t'], [{name: 'perm', ints: [0, 2, 1, 3]}]),
    node('Reshape', ['attended_t', 'merged_shape'], ['merged']), // [B, T, D]
    node('MatMul', ['merged', 'Wo'], ['out_mm']),
    node('Add', ['out_mm', 'bo'], ['y']),
  );
  for (const n of nodes) g.message(1, n);
  g.string(2, 'multi_head_attention');
  const inits: Array<[string, number[], Float32Array | BigInt64Array]> = [
    ['Wq', [D, D], wq],
    ['bq', [D], bq],
    ['Wk', [D, D], wk],
    ['bk', [D], bk],
    ['Wv', [D, D], wv],
    ['bv', [D], bv],
    ['Wo', [D, D], wo],
    ['bo', [D], bo],
    ['scale', [], new Float32Array([scale])],
    ['heads_shape', [4], BigInt64Array.from([B, T, H, d].map(BigInt))],
    ['merged_shape', [3], BigInt64Array.from([B, T, D].map(BigInt))],
  ];
  for (const [name, dims, data] of inits) {
    const expected = dims.reduce((a, b) => a * b, 1);
    if (data.length !== expected) {
      throw new Error(`${name}: expected ${expected} values, got ${data.length}`);
    }
    g.message(5, tensor(name, dims, data));
  }
  g.message(11, valueInfo('x', [B, T, D]));
  if (options.mask) g.message(11, valueInfo('mask', [B, 1, 1, T]));
  g.message(12, valueInfo('y', [B, T, D]));
  return new Writer()
    .int(1, 8) // ir_version
    .string(2, 'tfjs-attention bench')
    .message(7, g)
    .message(8, new Writer().string(1, '').int(2, 17)) // opset_import: ai.onnx 17
    .finish();
}

/** The additive mask [B, 1, 1, T] of valid lengths: 0 where key j < lens[b], else -1e9. */
export function additiveMask(lens: ArrayLike<number>, tokens: number): Float32Array {
  const m = new Float32Array(lens.length * tokens);
  for (let b = 0; b < lens.length; b++) {
    for (let j = lens[b]; j < tokens; j++) m[b * tokens + j] = -1e9;
  }
  return m;
}

/** max over i of |a - b| / (1e-5 + 1e-5 |b|): <= 1 means a equals b within 1e-5 abs + rel. */
export function closeness(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity;
  let worst = 0;
  for (let i = 0; i < a.length; i++) {
    const r = Math.abs(a[i] - b[i]) / (1e-5 + 1e-5 * Math.abs(b[i]));
    if (!(r <= worst)) worst = Number.isNaN(r) ? Infinity : Math.max(worst, r);
  }
  return worst;
}
