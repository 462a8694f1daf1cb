/**
 * A small reader of the protocol buffers wire format (proto2 / proto3 encoding): the fields of
 * a message in order, each with its number, wire type and value. Enough for SentencePiece's
 * `ModelProto` (varints, 32-bit floats, strings, bytes and nested messages); unknown fields are
 * skipped by their wire type, as protobuf's own parsers do. Truncated or malformed input is an
 * error naming the byte offset and what was expected.
 */

/** Protobuf's wire types: varint, 64-bit, length-delimited, group start / end (deprecated), 32-bit. */
export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LENGTH = 2;
export const WIRE_FIXED32 = 5;

/** One field of a message as it is on the wire. */
export interface ProtoField {
  /** The field number. */
  readonly field: number;
  /** The wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32). */
  readonly wireType: number;
  /** Where the field's value starts in the message's bytes. */
  readonly offset: number;
  /** A varint's low 32 bits, unsigned (0 for other wire types). */
  readonly low: number;
  /** A varint's bits 32..63, unsigned (0 for other wire types). */
  readonly high: number;
  /** A length-delimited value's bytes, or a fixed32 / fixed64 value's bytes (a view, not a copy). */
  readonly bytes: Uint8Array;
}

/** The error of a malformed message: `what` (the message's name), where and what was wrong. */
function malformed(what: string, offset: number, problem: string): Error {
  return new Error(`${what}: malformed protobuf at byte ${offset}: ${problem}.`);
}

/**
 * The fields of one protobuf message, in order. `what` names the message in errors
 * (`SentencePieceTokenizer: vocabulary.spm`). Groups (wire types 3 and 4) are refused: no
 * message this package reads has them.
 */
export function* protoFields(bytes: Uint8Array, what: string): Generator<ProtoField> {
  let at = 0;
  const end = bytes.length;
  const varint = (): [number, number] => {
    let low = 0;
    let high = 0;
    const start = at;
    for (let i = 0; i < 10; i++) {
      if (at >= end) throw malformed(what, start, 'a varint runs past the end of the input');
      const b = bytes[at++];
      const bits = b & 0x7f;
      if (i < 4) low |= bits << (7 * i);
      else if (i === 4) {
        low |= (bits & 0x0f) << 28;
        high |= bits >>> 4;
      } else high |= bits << (7 * i - 32);
      if ((b & 0x80) === 0) return [low >>> 0, high >>> 0];
    }
    throw malformed(what, start, 'a varint is longer than 10 bytes');
  };
  while (at < end) {
    const keyAt = at;
    const [key, keyHigh] = varint();
    const wireType = key & 7;
    const field = key >>> 3;
    if (keyHigh !== 0 || field === 0) {
      throw malformed(what, keyAt, `expected a field number in [1, 2^29 - 1], received ${field}`);
    }
    const offset = at;
    if (wireType === WIRE_VARINT) {
      const [low, high] = varint();
      yield {field, wireType, offset, low, high, bytes: bytes.subarray(offset, at)};
    } else if (wireType === WIRE_LENGTH) {
      const [length, lengthHigh] = varint();
      if (lengthHigh !== 0 || length > end - at) {
        throw malformed(
          what,
          offset,
          `field ${field} declares ${lengthHigh !== 0 ? 'over 2^32' : length} bytes, ` +
            `${end - at} remain`,
        );
      }
      const value = bytes.subarray(at, at + length);
      at += length;
      yield {field, wireType, offset, low: 0, high: 0, bytes: value};
    } else if (wireType === WIRE_FIXED32 || wireType === WIRE_FIXED64) {
      const size = wireType === WIRE_FIXED32 ? 4 : 8;
      if (size > end - at) {
        throw malformed(what, offset, `field ${field} needs ${size} bytes, ${end - at} remain`);
      }
      const value = bytes.subarray(at, at + size);
      at += size;
      yield {field, wireType, offset, low: 0, high: 0, bytes: value};
    } else {
      throw malformed(
        what,
        keyAt,
        `field ${field} has wire type ${wireType}; expected 0 (varint), 1 (64-bit), ` +
          '2 (length-delimited) or 5 (32-bit)',
      );
    }
  }
}

/** A field's value read as the scalar its declaration names; an error when the wire type differs. */
export class ProtoValues {
  constructor(private readonly what: string) {}

  private expect(f: ProtoField, wireType: number, type: string): void {
    if (f.wireType !== wireType) {
      throw malformed(
        this.what,
        f.offset,
        `field ${f.field} (${type}) has wire type ${f.wireType}, expected ${wireType}`,
      );
    }
  }

  /** An `int32` / `enum`: the low 32 bits, signed (negative values are 10-byte varints). */
  int32(f: ProtoField): number {
    this.expect(f, WIRE_VARINT, 'int32');
    return f.low | 0;
  }

  /** A `uint64` / `int64` as a number (exact below 2^53). */
  uint(f: ProtoField): number {
    this.expect(f, WIRE_VARINT, 'uint64');
    return f.high * 2 ** 32 + f.low;
  }

  /** A `bool`. */
  bool(f: ProtoField): boolean {
    this.expect(f, WIRE_VARINT, 'bool');
    return f.low !== 0 || f.high !== 0;
  }

  /** A `float` (little-endian IEEE 754 single). */
  float(f: ProtoField): number {
    this.expect(f, WIRE_FIXED32, 'float');
    return new DataView(f.bytes.buffer, f.bytes.byteOffset, 4).getFloat32(0, true);
  }

  /** A `bytes` field or an embedded message's bytes (a view). */
  bytes(f: ProtoField): Uint8Array {
    this.expect(f, WIRE_LENGTH, 'bytes');
    return f.bytes;
  }

  /** A `string` (UTF-8; invalid UTF-8 is an error, as protobuf's parsers refuse it). */
  string(f: ProtoField): string {
    this.expect(f, WIRE_LENGTH, 'string');
    try {
      return new TextDecoder('utf-8', {fatal: true}).decode(f.bytes);
    } catch {
      throw malformed(this.what, f.offset, `field ${f.field} (string) is not valid UTF-8`);
    }
  }
}
