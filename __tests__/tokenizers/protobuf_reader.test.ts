/**
 * The protobuf wire-format reader on hand-made bytes (each written out from the encoding rules of
 * protobuf.dev/programming-guides/encoding): varints of every length, negative int32 as 10-byte
 * varints, floats, strings, nested messages, unknown fields skipped, and truncated or malformed
 * input refused with the byte offset.
 */
import {protoFields, ProtoValues} from '../../src/tokenizers/protobuf_reader';
import {parseModelProto} from '../../src/tokenizers/sentence_piece_model';

const bytes = (...b: number[]): Uint8Array => Uint8Array.from(b);
const fields = (b: Uint8Array) => [...protoFields(b, 'test')];
const v = new ProtoValues('test');

describe('protoFields', () => {
  it('reads varints of one to ten bytes', () => {
    // field 1 = 1; field 2 = 150 (0x96 0x01); field 3 = 2^32 + 5; field 4 = -1 (int32, 10 bytes)
    // prettier-ignore
    const message = bytes(
      0x08, 0x01,
      0x10, 0x96, 0x01,
      0x18, 0x85, 0x80, 0x80, 0x80, 0x10,
      0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    );
    const f = fields(message);
    expect(f.map((x) => x.field)).toEqual([1, 2, 3, 4]);
    expect(v.int32(f[0])).toBe(1);
    expect(v.int32(f[1])).toBe(150);
    expect(v.uint(f[2])).toBe(2 ** 32 + 5);
    expect(v.int32(f[3])).toBe(-1);
    expect(v.bool(f[0])).toBe(true);
  });

  it('reads a float, a string, bytes and a nested message', () => {
    // field 2 (float) = 1.5 (0x3fc00000); field 1 (string) "hé"; field 5 nested {1: 7}
    // prettier-ignore
    const message = bytes(
      0x15, 0x00, 0x00, 0xc0, 0x3f,
      0x0a, 0x03, 0x68, 0xc3, 0xa9,
      0x2a, 0x02, 0x08, 0x07,
    );
    const f = fields(message);
    expect(v.float(f[0])).toBe(1.5);
    expect(v.string(f[1])).toBe('hé');
    expect([...v.bytes(f[1])]).toEqual([0x68, 0xc3, 0xa9]);
    const nested = fields(v.bytes(f[2]));
    expect(nested.map((x) => [x.field, v.int32(x)])).toEqual([[1, 7]]);
  });

  it('skips unknown fields of every wire type when reading a model', () => {
    // ModelProto: unknown 9 (varint), unknown 10 (fixed64), a piece {piece "a", score 0.5,
    // type 2 (unknown), unknown 7 (fixed32)}, unknown 11 (length-delimited)
    const piece = [0x0a, 0x01, 0x61, 0x15, 0x00, 0x00, 0x00, 0x3f, 0x18, 0x02, 0x3d, 1, 2, 3, 4];
    // prettier-ignore
    const message = bytes(
      0x48, 0x05,
      0x51, 1, 2, 3, 4, 5, 6, 7, 8,
      0x0a, piece.length, ...piece,
      0x5a, 0x02, 0xff, 0xff,
    );
    const model = parseModelProto(message, 'test');
    expect(model.pieces).toEqual([{piece: 'a', score: 0.5, type: 2}]);
    expect(model.normalizerSpec.addDummyPrefix).toBe(true);
    expect(model.trainerSpec.unkId).toBe(0);
  });

  it.each([
    ['a varint cut short', bytes(0x08, 0x96), 'byte 1: a varint runs past the end of the input'],
    [
      'a length past the end',
      bytes(0x0a, 0x05, 0x61),
      'byte 1: field 1 declares 5 bytes, 1 remain',
    ],
    ['a fixed32 cut short', bytes(0x15, 0x00, 0x00), 'byte 1: field 2 needs 4 bytes, 2 remain'],
    ['a fixed64 cut short', bytes(0x11, 0x00), 'byte 1: field 2 needs 8 bytes, 1 remain'],
    ['a key cut short', bytes(0x80), 'byte 0: a varint runs past the end of the input'],
    [
      'an eleven-byte varint',
      bytes(0x08, ...new Array<number>(10).fill(0xff), 0x01),
      'byte 1: a varint is longer than 10 bytes',
    ],
    [
      'field number 0',
      bytes(0x00, 0x01),
      'byte 0: expected a field number in [1, 2^29 - 1], received 0',
    ],
    ['a group', bytes(0x0b), 'byte 0: field 1 has wire type 3; expected 0 (varint)'],
  ])('refuses %s', (_, message, problem) => {
    expect(() => fields(message)).toThrow(`test: malformed protobuf at ${problem}`);
  });

  it('refuses a value of the wrong wire type and a string that is not UTF-8', () => {
    const [varint] = fields(bytes(0x08, 0x01));
    expect(() => v.float(varint)).toThrow(
      'test: malformed protobuf at byte 1: field 1 (float) has wire type 0, expected 5.',
    );
    const [text] = fields(bytes(0x0a, 0x01, 0xff));
    expect(() => v.string(text)).toThrow(
      'test: malformed protobuf at byte 1: field 1 (string) is not valid UTF-8.',
    );
  });
});
