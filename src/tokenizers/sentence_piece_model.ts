/**
 * SentencePiece's `ModelProto` (sentencepiece_model.proto), the bytes keras-hub stores as a
 * preset's `vocabulary.spm`: the pieces (string, score, type), the fields of `TrainerSpec` that
 * tokenizing reads, and the normalizer and denormalizer specs, with protobuf's defaults.
 */
import {ProtoReader} from './protobuf_reader';

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
  /** The piece's UTF-8, one character a byte (byte_string.ts): sentencepiece's map key. */
  readonly pieceBytes: string;
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

function readPiece(r: ProtoReader): SentencePiece {
  let pieceBytes = '';
  let score = 0;
  let type: number = PieceType.Normal;
  while (r.next()) {
    if (r.field === 1) pieceBytes = r.byteString();
    else if (r.field === 2) score = r.float();
    else if (r.field === 3) type = r.int32();
  }
  return {pieceBytes, score, type};
}

function readTrainerSpec(readers: readonly ProtoReader[]): TrainerSpec {
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
  for (const r of readers) {
    while (r.next()) {
      switch (r.field) {
        case 3:
          spec.modelType = r.int32();
          break;
        case 24:
          spec.treatWhitespaceAsSuffix = r.bool();
          break;
        case 35:
          spec.byteFallback = r.bool();
          break;
        case 40:
          spec.unkId = r.int32();
          break;
        case 41:
          spec.bosId = r.int32();
          break;
        case 42:
          spec.eosId = r.int32();
          break;
        case 43:
          spec.padId = r.int32();
          break;
        case 44:
          spec.unkSurface = r.string();
          break;
      }
    }
  }
  return spec;
}

function readNormalizerSpec(readers: readonly ProtoReader[]): NormalizerSpec {
  const spec = {
    name: '',
    precompiledCharsmap: new Uint8Array(0) as Uint8Array,
    addDummyPrefix: true,
    removeExtraWhitespaces: true,
    escapeWhitespaces: true,
  };
  for (const r of readers) {
    while (r.next()) {
      if (r.field === 1) spec.name = r.string();
      else if (r.field === 2) spec.precompiledCharsmap = r.bytesValue();
      else if (r.field === 3) spec.addDummyPrefix = r.bool();
      else if (r.field === 4) spec.removeExtraWhitespaces = r.bool();
      else if (r.field === 5) spec.escapeWhitespaces = r.bool();
    }
  }
  return spec;
}

/**
 * Parses a serialized ModelProto. `what` names the bytes in errors
 * (`SentencePieceTokenizer: the SentencePiece model`).
 */
export function parseModelProto(bytes: Uint8Array, what: string): SentencePieceModelProto {
  const r = new ProtoReader(bytes, what);
  const pieces: SentencePiece[] = [];
  // an embedded message given more than once is merged by protobuf: read each in order
  const trainer: ProtoReader[] = [];
  const normalizer: ProtoReader[] = [];
  const denormalizer: ProtoReader[] = [];
  while (r.next()) {
    if (r.field === 1) pieces.push(readPiece(r.message()));
    else if (r.field === 2) trainer.push(r.message());
    else if (r.field === 3) normalizer.push(r.message());
    else if (r.field === 5) denormalizer.push(r.message());
  }
  return {
    pieces,
    trainerSpec: readTrainerSpec(trainer),
    normalizerSpec: readNormalizerSpec(normalizer),
    denormalizerSpec: denormalizer.length === 0 ? undefined : readNormalizerSpec(denormalizer),
  };
}
