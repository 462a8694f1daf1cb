/**
 * SentencePiece's `ModelProto` (sentencepiece_model.proto), the bytes keras-hub stores as a
 * preset's `vocabulary.spm`: the pieces (string, score, type), the fields of `TrainerSpec` that
 * tokenizing reads, and the normalizer and denormalizer specs, with protobuf's defaults.
 */
import {protoFields, ProtoValues} from './protobuf_reader';

/** A piece's type (ModelProto.SentencePiece.Type). */
export const PieceType = {
  Normal: 1,
  Unknown: 2,
  Control: 3,
  UserDefined: 4,
  Unused: 5,
  Byte: 6,
} as const;

/** One entry of the vocabulary. */
export interface SentencePiece {
  readonly piece: string;
  readonly score: number;
  /** A {@link PieceType} value. */
  readonly type: number;
}

/** TrainerSpec's model types. */
export const ModelType = {Unigram: 1, Bpe: 2, Word: 3, Char: 4} as const;

/** The fields of TrainerSpec that tokenizing reads. */
export interface TrainerSpec {
  readonly modelType: number;
  readonly byteFallback: boolean;
  readonly treatWhitespaceAsSuffix: boolean;
  readonly unkId: number;
  readonly bosId: number;
  readonly eosId: number;
  readonly padId: number;
  /** What `decode` writes for the unknown piece (default " \u2047 "). */
  readonly unkSurface: string;
}

/** NormalizerSpec (the model's `normalizer_spec` and `denormalizer_spec`). */
export interface NormalizerSpec {
  readonly name: string;
  /** A double-array trie and the strings it maps to (empty: identity). */
  readonly precompiledCharsmap: Uint8Array;
  readonly addDummyPrefix: boolean;
  readonly removeExtraWhitespaces: boolean;
  readonly escapeWhitespaces: boolean;
}

/** A parsed ModelProto. */
export interface SentencePieceModelProto {
  readonly pieces: readonly SentencePiece[];
  readonly trainerSpec: TrainerSpec;
  readonly normalizerSpec: NormalizerSpec;
  /** Present only when the model has one (its charsmap is applied to decoded text). */
  readonly denormalizerSpec?: NormalizerSpec;
}

function readPiece(bytes: Uint8Array, v: ProtoValues, what: string): SentencePiece {
  let piece = '';
  let score = 0;
  let type: number = PieceType.Normal;
  for (const f of protoFields(bytes, what)) {
    if (f.field === 1) piece = v.string(f);
    else if (f.field === 2) score = v.float(f);
    else if (f.field === 3) type = v.int32(f);
  }
  return {piece, score, type};
}

function readTrainerSpec(bytes: Uint8Array, v: ProtoValues, what: string): TrainerSpec {
  const spec = {
    modelType: ModelType.Unigram as number,
    byteFallback: false,
    treatWhitespaceAsSuffix: false,
    unkId: 0,
    bosId: 1,
    eosId: 2,
    padId: -1,
    unkSurface: ' \u2047 ',
  };
  for (const f of protoFields(bytes, what)) {
    switch (f.field) {
      case 3:
        spec.modelType = v.int32(f);
        break;
      case 24:
        spec.treatWhitespaceAsSuffix = v.bool(f);
        break;
      case 35:
        spec.byteFallback = v.bool(f);
        break;
      case 40:
        spec.unkId = v.int32(f);
        break;
      case 41:
        spec.bosId = v.int32(f);
        break;
      case 42:
        spec.eosId = v.int32(f);
        break;
      case 43:
        spec.padId = v.int32(f);
        break;
      case 44:
        spec.unkSurface = v.string(f);
        break;
    }
  }
  return spec;
}

function readNormalizerSpec(bytes: Uint8Array, v: ProtoValues, what: string): NormalizerSpec {
  const spec = {
    name: '',
    precompiledCharsmap: new Uint8Array(0) as Uint8Array,
    addDummyPrefix: true,
    removeExtraWhitespaces: true,
    escapeWhitespaces: true,
  };
  for (const f of protoFields(bytes, what)) {
    if (f.field === 1) spec.name = v.string(f);
    else if (f.field === 2) spec.precompiledCharsmap = v.bytes(f);
    else if (f.field === 3) spec.addDummyPrefix = v.bool(f);
    else if (f.field === 4) spec.removeExtraWhitespaces = v.bool(f);
    else if (f.field === 5) spec.escapeWhitespaces = v.bool(f);
  }
  return spec;
}

/**
 * Parses a serialized ModelProto. `what` names the bytes in errors
 * (`SentencePieceTokenizer: vocabulary.spm`).
 */
export function parseModelProto(bytes: Uint8Array, what: string): SentencePieceModelProto {
  const v = new ProtoValues(what);
  const pieces: SentencePiece[] = [];
  let trainer: Uint8Array | undefined;
  let normalizer: Uint8Array | undefined;
  let denormalizer: Uint8Array | undefined;
  for (const f of protoFields(bytes, what)) {
    // a message field given twice is merged by protobuf; the last one read wins field by field,
    // which for these specs (scalars only) is reading both in order
    if (f.field === 1) pieces.push(readPiece(v.bytes(f), v, what));
    else if (f.field === 2) trainer = concat(trainer, v.bytes(f));
    else if (f.field === 3) normalizer = concat(normalizer, v.bytes(f));
    else if (f.field === 5) denormalizer = concat(denormalizer, v.bytes(f));
  }
  const empty = new Uint8Array(0);
  return {
    pieces,
    trainerSpec: readTrainerSpec(trainer ?? empty, v, what),
    normalizerSpec: readNormalizerSpec(normalizer ?? empty, v, what),
    denormalizerSpec:
      denormalizer === undefined ? undefined : readNormalizerSpec(denormalizer, v, what),
  };
}

/** Two serialized messages as one (protobuf merges a repeated embedded message this way). */
function concat(a: Uint8Array | undefined, b: Uint8Array): Uint8Array {
  if (a === undefined) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
