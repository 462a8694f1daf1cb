/**
 * keras-hub's SentencePieceTokenizer (keras_hub/src/tokenizers/sentence_piece_tokenizer.py): a
 * SentencePiece model proto (`vocabulary.spm`) read and run as tensorflow-text's
 * SentencepieceOp runs it (the sentencepiece library): the model's normalizer, then its BPE or
 * unigram model, unknown pieces as their UTF-8 bytes when the model has byte fallback;
 * `decode` as sentencepiece's `Decode` (keras-hub's `detokenize`).
 */
import {fromByteString, toByteString, validCharLength} from './byte_string';
import {PieceTrie} from './piece_trie';
import type {PieceTable} from './sentence_piece_bpe';
import {bpeEncode} from './sentence_piece_bpe';
import {ModelType, parseModelProto, PieceType} from './sentence_piece_model';
import type {SentencePieceModelProto} from './sentence_piece_model';
import {SentencePieceNormalizer, SPACE_SYMBOL} from './sentence_piece_normalizer';
import {unigramEncode, unigramScores} from './sentence_piece_unigram';
import type {UnigramScores} from './sentence_piece_unigram';
import {SENTENCE_PIECE_ASSETS, sentencePiecePresetOptions} from './preset_tokenizer';
import type {TokenizerAsset, TokenizerConfig} from './preset_tokenizer';
import {checkIds, requireToken} from './tokenizer';
import type {Tokenizer} from './tokenizer';

/** Options of {@link SentencePieceTokenizer}. */
export interface SentencePieceTokenizerOptions {
  /** The serialized SentencePiece model (the bytes of keras-hub's `vocabulary.spm`). */
  proto: Uint8Array | ArrayBuffer;
  /** Put the model's `<s>` (its bos id) before each text (keras-hub's `add_bos`). Default false. */
  addBos?: boolean;
  /** Put the model's `</s>` (its eos id) after each text (keras-hub's `add_eos`). Default false. */
  addEos?: boolean;
}

/**
 * A SentencePiece tokenizer: BPE (with or without byte fallback) and unigram models, the
 * normalization the model declares (its precompiled charsmap: nmt_nfkc, nfkc_cf, identity...;
 * dummy prefix, extra whitespace, U+2581 for spaces), ids and strings as keras-hub's
 * SentencePieceTokenizer gives them.
 *
 * A family's tokenizer subclasses it: a `className`, a constructor that passes its name (errors
 * start with it) and sets its special tokens with `this.special(piece)`; `fileAssets`
 * (`['vocabulary.spm']`) and `fromPreset` are inherited (`fromPreset` calls the subclass'
 * constructor with the options read from the preset):
 * ```ts
 * class GemmaTokenizer extends SentencePieceTokenizer {
 *   static override get className(): string {
 *     return 'GemmaTokenizer';
 *   }
 *   constructor(options: SentencePieceTokenizerOptions) {
 *     super(options, 'GemmaTokenizer');
 *     this.startTokenId = this.special('<bos>');
 *     this.endTokenId = this.special('<eos>');
 *     this.padTokenId = this.special('<pad>');
 *     this.stopTokenIds = [this.endTokenId];
 *     this.specialTokenIds = [this.startTokenId, this.endTokenId, this.padTokenId];
 *   }
 * }
 * ```
 *
 * @example
 * ```js
 * const proto = fs.readFileSync('presets/gemma/assets/tokenizer/vocabulary.spm');
 * const tokenizer = new SentencePieceTokenizer({proto});
 * tokenizer.decode(tokenizer.encode('Hello world')); // 'Hello world'
 * ```
 */
export class SentencePieceTokenizer implements Tokenizer {
  /** keras-hub's class name, as a preset's tokenizer.json names it. */
  static get className(): string {
    return 'SentencePieceTokenizer';
  }
  /** The files it reads from a preset (keras-hub's `file_assets`). */
  static get fileAssets(): readonly string[] {
    return SENTENCE_PIECE_ASSETS;
  }
  /** The assets read as bytes, not text. */
  static get binaryAssets(): readonly string[] {
    return SENTENCE_PIECE_ASSETS;
  }
  /**
   * The tokenizer of a preset's tokenizer.json config (`add_bos`, `add_eos`) and its
   * `vocabulary.spm`, made with the constructor of the class it is called on (a subclass too).
   */
  static fromPreset<T extends SentencePieceTokenizer>(
    this: new (options: SentencePieceTokenizerOptions) => T,
    config: TokenizerConfig,
    asset: TokenizerAsset,
  ): T {
    return new this(sentencePiecePresetOptions(config, asset));
  }

  /** The name errors start with (a literal: minified bundles rename classes). */
  protected readonly owner: string;
  readonly vocabularySize: number;
  startTokenId?: number;
  endTokenId?: number;
  padTokenId?: number;
  /** The ids generation stops at; keras-hub's SentencePieceTokenizer has no end token: none. */
  stopTokenIds: readonly number[] = [];
  /** keras-hub's `special_token_ids` (stripped from generated text), ascending. None here. */
  specialTokenIds: readonly number[] = [];
  /** keras-hub's `add_bos`. */
  readonly addBos: boolean;
  /** keras-hub's `add_eos`. */
  readonly addEos: boolean;
  /** The model: `unigram` or `bpe`. */
  readonly modelType: 'unigram' | 'bpe';
  /** The model's unknown piece's id (`<unk>`). */
  readonly unknownTokenId: number;
  /** The model's bos id (its `<s>`; -1 when it has none). */
  readonly bosId: number;
  /** The model's eos id (its `</s>`; -1 when it has none). */
  readonly eosId: number;
  private readonly proto: SentencePieceModelProto;
  /** Each id's piece (text). */
  private readonly pieceTexts: readonly string[];
  /** Every piece (text) -> id. */
  private readonly ids: ReadonlyMap<string, number>;
  /** Normal, user-defined and unused pieces by byte string, scores and types. */
  private readonly table: PieceTable;
  /** Control, unknown and byte pieces by byte string (sentencepiece's reserved ids). */
  private readonly reserved: ReadonlyMap<string, number>;
  private readonly normalizer: SentencePieceNormalizer;
  private readonly denormalizer: SentencePieceNormalizer | undefined;
  private readonly unigramTrie: PieceTrie | undefined;
  private readonly scores: UnigramScores | undefined;
  /** The id of each byte's piece `<0xXX>` (byte fallback), or undefined. */
  private readonly byteIds: Int32Array | undefined;

  constructor(options: SentencePieceTokenizerOptions, owner = 'SentencePieceTokenizer') {
    this.owner = owner;
    if (options === null || typeof options !== 'object') {
      throw new Error(`${owner}: expected options {proto}, received ${String(options)}.`);
    }
    const {proto} = options;
    const bytes = asBytes(proto);
    if (bytes === undefined || bytes.length === 0) {
      throw new Error(
        `${owner}: expected options.proto to be the bytes of a SentencePiece model ` +
          `(a non-empty Uint8Array or ArrayBuffer, vocabulary.spm), received ` +
          `${bytes === undefined ? describe(proto) : 'no bytes'}.`,
      );
    }
    const what = `${owner}: the SentencePiece model`;
    this.proto = parseModelProto(bytes, what);
    const {pieces, trainerSpec, normalizerSpec, denormalizerSpec} = this.proto;
    if (pieces.length === 0) {
      throw new Error(`${what} has no pieces; expected a vocabulary (ModelProto.pieces).`);
    }
    const type = trainerSpec.modelType;
    if (type !== ModelType.Unigram && type !== ModelType.Bpe) {
      throw new Error(
        `${what} has model_type ${type}; expected 1 (UNIGRAM) or 2 (BPE) (WORD and CHAR ` +
          'models are not implemented).',
      );
    }
    this.modelType = type === ModelType.Bpe ? 'bpe' : 'unigram';
    const normal = new Map<string, number>();
    const reserved = new Map<string, number>();
    const ids = new Map<string, number>();
    const scores = new Float32Array(pieces.length);
    const types = new Uint8Array(pieces.length);
    let userDefined: PieceTrie | undefined;
    let unknown = -1;
    const byteIds = trainerSpec.byteFallback ? new Int32Array(256).fill(-1) : undefined;
    pieces.forEach((p, id) => {
      if (p.piece === '') throw new Error(`${what}: piece ${id} is empty; pieces must not be.`);
      const key = toByteString(p.piece);
      const isNormal =
        p.type === PieceType.Normal ||
        p.type === PieceType.UserDefined ||
        p.type === PieceType.Unused;
      const map = isNormal ? normal : reserved;
      if (map.has(key)) {
        throw new Error(`${what}: the piece ${JSON.stringify(p.piece)} is defined twice.`);
      }
      map.set(key, id);
      if (!ids.has(p.piece)) ids.set(p.piece, id);
      scores[id] = p.score;
      types[id] = p.type;
      if (p.type === PieceType.UserDefined) (userDefined ??= new PieceTrie()).add(key, id);
      if (p.type === PieceType.Unknown) {
        if (unknown >= 0)
          throw new Error(`${what}: it has two unknown pieces (ids ${unknown}, ${id}).`);
        unknown = id;
      }
      if (p.type === PieceType.Byte) {
        const byte = pieceByte(p.piece);
        if (byteIds === undefined || byte < 0) {
          throw new Error(
            `${what}: the byte piece ${JSON.stringify(p.piece)} is ` +
              (byteIds === undefined ? 'there although byte_fallback is false.' : 'not <0xXX>.'),
          );
        }
        byteIds[byte] = id;
      }
    });
    if (unknown < 0) {
      throw new Error(`${what} has no unknown piece; expected one piece of type UNKNOWN (<unk>).`);
    }
    if (byteIds !== undefined && byteIds.includes(-1)) {
      throw new Error(
        `${what} has byte_fallback but not the 256 byte pieces <0x00>..<0xFF> it needs.`,
      );
    }
    this.vocabularySize = pieces.length;
    this.pieceTexts = pieces.map((p) => p.piece);
    this.ids = ids;
    this.reserved = reserved;
    this.table = {pieces: normal, scores, types, userDefined};
    this.unknownTokenId = unknown;
    this.byteIds = byteIds;
    const inRange = (id: number): number => (id >= 0 && id < pieces.length ? id : -1);
    this.bosId = inRange(trainerSpec.bosId);
    this.eosId = inRange(trainerSpec.eosId);
    this.normalizer = new SentencePieceNormalizer(
      normalizerSpec,
      userDefined,
      trainerSpec.treatWhitespaceAsSuffix,
      what,
    );
    this.denormalizer =
      denormalizerSpec !== undefined && denormalizerSpec.precompiledCharsmap.length > 0
        ? new SentencePieceNormalizer(denormalizerSpec, undefined, false, what)
        : undefined;
    if (this.modelType === 'unigram') {
      const trie = new PieceTrie();
      for (const [key, id] of normal) trie.add(key, id);
      this.unigramTrie = trie;
      this.scores = unigramScores(this.table);
    }
    this.addBos = options.addBos ?? false;
    this.addEos = options.addEos ?? false;
    for (const [flag, name] of [
      [this.addBos, 'addBos'],
      [this.addEos, 'addEos'],
    ] as const) {
      if (typeof flag !== 'boolean') {
        throw new Error(
          `${owner}: options.${name} must be true or false, received ${String(flag)}.`,
        );
      }
    }
    if (this.addBos && this.bosId < 0) {
      throw new Error(
        `${owner}: addBos needs the model's bos piece; its bos_id is ${trainerSpec.bosId}.`,
      );
    }
    if (this.addEos && this.eosId < 0) {
      throw new Error(
        `${owner}: addEos needs the model's eos piece; its eos_id is ${trainerSpec.eosId}.`,
      );
    }
  }

  /** The id of a piece this tokenizer needs (a special token), or an error naming it. */
  protected special(token: string): number {
    return requireToken(this.ids, token, this.owner);
  }

  tokenToId(token: string): number | undefined {
    return this.ids.get(token);
  }

  idToToken(id: number): string | undefined {
    return Number.isInteger(id) ? this.pieceTexts[id] : undefined;
  }

  /** The id of a piece given as a byte string: reserved pieces first, then the others, else unknown. */
  private pieceId(key: string): number {
    return this.reserved.get(key) ?? this.table.pieces.get(key) ?? this.unknownTokenId;
  }

  /** The ids of `text`, as keras-hub's SentencePieceTokenizer (tensorflow-text) gives them. */
  encode(text: string): number[] {
    if (typeof text !== 'string') {
      throw new Error(`${this.owner}.encode: expected a string, received ${describe(text)}.`);
    }
    const normalized = this.normalizer.normalize(toByteString(text));
    const pieces: Array<[string, number]> =
      this.modelType === 'bpe'
        ? bpeEncode(normalized, this.table).map((p) => [p, this.pieceId(p)])
        : unigramEncode(
            normalized,
            this.table,
            this.unigramTrie as PieceTrie,
            this.scores as UnigramScores,
            this.unknownTokenId,
          );
    const out: number[] = [];
    if (this.addBos) out.push(this.bosId);
    let previousUnknown = false;
    for (const [piece, id] of pieces) {
      const unknown = id === this.unknownTokenId;
      if (unknown && this.byteIds !== undefined) {
        for (let i = 0; i < piece.length; i++) out.push(this.byteIds[piece.charCodeAt(i)]);
      } else if (!(unknown && previousUnknown)) {
        // a run of unknown pieces is one unknown id
        out.push(id);
      }
      previousUnknown = unknown;
    }
    if (this.addEos) out.push(this.eosId);
    return out;
  }

  /**
   * keras-hub's `detokenize(ids)` (sentencepiece's `Decode`): control pieces dropped, the unknown
   * piece as " \u2047 ", byte pieces joined into UTF-8 (a malformed byte as U+FFFD), U+2581 as a
   * space, the first piece's leading space dropped when the model adds a dummy prefix.
   */
  decode(ids: number[]): string {
    checkIds(ids, this.vocabularySize, this.owner);
    const {normalizerSpec, trainerSpec} = this.proto;
    const stripLeading = normalizerSpec.addDummyPrefix || normalizerSpec.removeExtraWhitespaces;
    const unkSurface = toByteString(trainerSpec.unkSurface);
    const types = this.table.types;
    let text = '';
    let bytes = '';
    let isBosSpace = true;
    let bosSpaceSeen = false;
    const flushBytes = (): void => {
      for (let at = 0; at < bytes.length;) {
        const length = validCharLength(bytes, at);
        text += length === 0 ? '\xef\xbf\xbd' : bytes.substr(at, length);
        at += length === 0 ? 1 : length;
      }
      bytes = '';
    };
    for (const id of ids) {
      const type = types[id];
      if (type === PieceType.Byte) {
        bytes += String.fromCharCode(pieceByte(this.pieceTexts[id]));
        continue;
      }
      flushBytes();
      if (bosSpaceSeen || text.length > 0) isBosSpace = false;
      bosSpaceSeen = false;
      if (type === PieceType.Control) continue;
      if (type === PieceType.Unknown) {
        text += unkSurface;
        continue;
      }
      let piece = toByteString(this.pieceTexts[id]);
      if (isBosSpace && stripLeading && piece.startsWith(SPACE_SYMBOL)) {
        piece = piece.slice(SPACE_SYMBOL.length);
        bosSpaceSeen = !normalizerSpec.removeExtraWhitespaces;
      }
      text += piece.split(SPACE_SYMBOL).join(' ');
    }
    flushBytes();
    if (this.denormalizer !== undefined) text = this.denormalizer.normalize(text);
    return fromByteString(text);
  }
}

/**
 * A Uint8Array of the bytes of a typed array or an ArrayBuffer (of this realm or another: Node's
 * Buffers in a test VM), or undefined.
 */
function asBytes(value: unknown): Uint8Array | undefined {
  if (ArrayBuffer.isView(value)) {
    return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  }
  if (Object.prototype.toString.call(value) === '[object ArrayBuffer]') {
    return new Uint8Array(value as ArrayBuffer);
  }
  return undefined;
}

/** The byte of a piece `<0xXX>`, or -1. */
function pieceByte(piece: string): number {
  const m = /^<0x([0-9A-F]{2})>$/.exec(piece);
  return m === null ? -1 : parseInt(m[1], 16);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? (value.constructor?.name ?? 'an object') : typeof value;
}
