/**
 * A small reader of the protocol buffers wire format (proto2 / proto3 encoding): the fields of
 * a message in order, each with its number, wire type and value. Enough for SentencePiece's
 * `ModelProto` (varints, 32-bit floats, strings, bytes and nested messages); unknown fields are
 * skipped by their wire type, as protobuf's own parsers do. Truncated or malformed input is an
 * error naming the byte offset and what was expected. One cursor walks a message without
 * allocating per field (a Gemma vocabulary has 262,144 pieces of three fields each).
 */

/** Protobuf's wire types: varint, 64-bit, length-delimited, 32-bit (3 and 4, groups, refused). */
export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LENGTH = 2;
export const WIRE_FIXED32 = 5;

/** The error of a malformed message: `what` (the message's name), where and what was wrong. */
function malformed(what: string, offset: number, problem: string): Error {
  return new Error(`${what}: malformed protobuf at byte ${offset}: ${problem}.`);
}

/**
 * A cursor over the fields of one protobuf message: `next()` reads the next field's key and
 * value (false at the end), then the accessors read that value as its declared type (an error
 * when the wire type differs). `what` names the message in errors
 * (`SentencePieceTokenizer: the SentencePiece model`). Offsets in errors are from the start of
 * the outermost message.
 */
export class ProtoReader {
  /** The current field's number. */
  field = 0;
  /** The current field's wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32). */
  wireType = 0;
  /** Where the current field's value starts (in `bytes`). */
  offset = 0;
  /** A varint's low 32 bits, unsigned. */
  private low = 0;
  /** A varint's bits 32..63, unsigned. */
  private high = 0;
  /** A length-delimited or fixed value's start and end in `bytes`. */
  private start = 0;
  private end = 0;
  private at: number;
  private readonly limit: number;
  /** The whole input as a byte string, made on the first `byteString()` and shared with nested cursors. */
  private readonly shared: {text?: string; decoder?: TextDecoder};

  /** A cursor over `bytes[from, to)` (default all of it). */
  constructor(
    private readonly bytes: Uint8Array,
    private readonly what: string,
    from = 0,
    to = bytes.length,
    shared: {text?: string; decoder?: TextDecoder} = {},
  ) {
    this.at = from;
    this.limit = to;
    this.shared = shared;
  }

  /** A cursor over the current field's embedded message. */
  message(): ProtoReader {
    this.expect(WIRE_LENGTH, 'message');
    return new ProtoReader(this.bytes, this.what, this.start, this.end, this.shared);
  }

  /** Reads a varint at the cursor into low / high. */
  private varint(): void {
    const bytes = this.bytes;
    let low = 0;
    let high = 0;
    const start = this.at;
    for (let i = 0; i < 10; i++) {
      if (this.at >= this.limit) {
        throw malformed(this.what, start, 'a varint runs past the end of the input');
      }
      const b = bytes[this.at++];
      const bits = b & 0x7f;
      if (i < 4) low |= bits << (7 * i);
      else if (i === 4) {
        low |= (bits & 0x0f) << 28;
        high |= bits >>> 4;
      } else high |= bits << (7 * i - 32);
      if ((b & 0x80) === 0) {
        this.low = low >>> 0;
        this.high = high >>> 0;
        return;
      }
    }
    throw malformed(this.what, start, 'a varint is longer than 10 bytes');
  }

  /** Reads the next field; false at the end of the message. */
  next(): boolean {
    if (this.at >= this.limit) return false;
    const keyAt = this.at;
    this.varint();
    const wireType = this.low & 7;
    const field = this.low >>> 3;
    if (this.high !== 0 || field === 0) {
      throw malformed(
        this.what,
        keyAt,
        `expected a field number in [1, 2^29 - 1], received ${field}`,
      );
    }
    this.field = field;
    this.wireType = wireType;
    this.offset = this.at;
    const left = (): number => this.limit - this.at;
    if (wireType === WIRE_VARINT) {
      this.varint();
    } else if (wireType === WIRE_LENGTH) {
      this.varint();
      const length = this.low;
      if (this.high !== 0 || length > left()) {
        throw malformed(
          this.what,
          this.offset,
          `field ${field} declares ${this.high !== 0 ? 'over 2^32' : length} bytes, ` +
            `${left()} remain`,
        );
      }
      this.start = this.at;
      this.at += length;
      this.end = this.at;
    } else if (wireType === WIRE_FIXED32 || wireType === WIRE_FIXED64) {
      const size = wireType === WIRE_FIXED32 ? 4 : 8;
      if (size > left()) {
        throw malformed(
          this.what,
          this.offset,
          `field ${field} needs ${size} bytes, ${left()} remain`,
        );
      }
      this.start = this.at;
      this.at += size;
      this.end = this.at;
    } else {
      throw malformed(
        this.what,
        keyAt,
        `field ${field} has wire type ${wireType}; expected 0 (varint), 1 (64-bit), ` +
          '2 (length-delimited) or 5 (32-bit)',
      );
    }
    return true;
  }

  private expect(wireType: number, type: string): void {
    if (this.wireType !== wireType) {
      throw malformed(
        this.what,
        this.offset,
        `field ${this.field} (${type}) has wire type ${this.wireType}, expected ${wireType}`,
      );
    }
  }

  /** An `int32` / `enum`: the low 32 bits, signed (negative values are 10-byte varints). */
  int32(): number {
    this.expect(WIRE_VARINT, 'int32');
    return this.low | 0;
  }

  /** A `uint64` / `int64` as a number (exact below 2^53). */
  uint(): number {
    this.expect(WIRE_VARINT, 'uint64');
    return this.high * 2 ** 32 + this.low;
  }

  /** A `bool`. */
  bool(): boolean {
    this.expect(WIRE_VARINT, 'bool');
    return this.low !== 0 || this.high !== 0;
  }

  /** A `float` (little-endian IEEE 754 single). */
  float(): number {
    this.expect(WIRE_FIXED32, 'float');
    const b = this.bytes;
    const s = this.start;
    return new DataView(b.buffer, b.byteOffset + s, 4).getFloat32(0, true);
  }

  /** A `bytes` field or an embedded message's bytes (a view, not a copy). */
  bytesValue(): Uint8Array {
    this.expect(WIRE_LENGTH, 'bytes');
    return this.bytes.subarray(this.start, this.end);
  }

  /**
   * A `string` or `bytes` field as a byte string: one character per byte (proto2 does not check
   * that a string is UTF-8, nor does sentencepiece).
   */
  byteString(): string {
    this.expect(WIRE_LENGTH, 'string');
    if (this.shared.text === undefined) {
      // one conversion of the whole input, then a slice per field (262,144 pieces: one
      // String.fromCharCode per piece took seconds)
      let text = '';
      for (let i = 0; i < this.bytes.length; i += 8192) {
        text += String.fromCharCode(...this.bytes.subarray(i, i + 8192));
      }
      this.shared.text = text;
    }
    return this.shared.text.slice(this.start, this.end);
  }

  /** A `string` (UTF-8; invalid UTF-8 is an error). */
  string(): string {
    this.expect(WIRE_LENGTH, 'string');
    try {
      this.shared.decoder ??= new TextDecoder('utf-8', {fatal: true, ignoreBOM: true});
      return this.shared.decoder.decode(this.bytes.subarray(this.start, this.end));
    } catch {
      throw malformed(this.what, this.offset, `field ${this.field} (string) is not valid UTF-8`);
    }
  }
}
