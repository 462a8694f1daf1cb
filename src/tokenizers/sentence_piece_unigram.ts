/**
 * SentencePiece's unigram model (unigram_model.cc, its optimized Viterbi `EncodeOptimized`) on a
 * normalized byte string: the best-scoring segmentation into pieces, a user-defined symbol scored
 * `length * max_score - 0.1` (always chosen), a character no piece starts with scored
 * `min_score - 10` as unknown. Sums are float32, as sentencepiece's.
 */
import {oneCharLength} from './byte_string';
import type {PieceTable} from './sentence_piece_bpe';

const NORMAL = 1;
const USER_DEFINED = 4;
const UNUSED = 5;

/** The scores a unigram model derives from its pieces. */
export interface UnigramScores {
  /** The lowest score of a normal piece. */
  readonly minScore: number;
  /** The highest score of a normal piece. */
  readonly maxScore: number;
}

/** min and max over the normal pieces (FLT_MAX and FLT_MIN when there are none). */
export function unigramScores(table: PieceTable): UnigramScores {
  let minScore = 3.4028234663852886e38;
  let maxScore = 1.1754943508222875e-38;
  for (let id = 0; id < table.types.length; id++) {
    if (table.types[id] === NORMAL) {
      minScore = Math.min(minScore, table.scores[id]);
      maxScore = Math.max(maxScore, table.scores[id]);
    }
  }
  return {minScore, maxScore};
}

/**
 * The pieces of a normalized byte string with their ids (`unkId` for an unknown character), as
 * sentencepiece's unigram `Encode`. `trie` holds the normal, user-defined and unused pieces.
 */
export function unigramEncode(
  normalized: string,
  table: PieceTable,
  trie: {prefixes(s: string, at: number, found: (length: number, id: number) => void): void},
  scores: UnigramScores,
  unkId: number,
): Array<[string, number]> {
  const size = normalized.length;
  if (size === 0) return [];
  const f = Math.fround;
  const unkScore = f(scores.minScore - 10);
  const bestScore = new Float32Array(size + 1);
  const startsAt = new Int32Array(size + 1).fill(-1);
  const ids = new Int32Array(size + 1).fill(-1);
  for (let at = 0; at < size;) {
    const here = bestScore[at];
    const charLength = Math.min(oneCharLength(normalized.charCodeAt(at)), size - at);
    let hasSingle = false;
    trie.prefixes(normalized, at, (length, id) => {
      const type = table.types[id];
      if (type === UNUSED) return;
      const end = at + length;
      // a user-defined symbol's score is a double (- 0.1), added in double, kept as float32
      const candidate =
        type === USER_DEFINED
          ? f(length * scores.maxScore) - 0.1 + here
          : f(table.scores[id] + here);
      if (startsAt[end] === -1 || candidate > bestScore[end]) {
        bestScore[end] = candidate;
        startsAt[end] = at;
        ids[end] = id;
      }
      if (length === charLength) hasSingle = true;
    });
    if (!hasSingle) {
      const end = at + charLength;
      const candidate = f(unkScore + here);
      if (startsAt[end] === -1 || candidate > bestScore[end]) {
        bestScore[end] = candidate;
        startsAt[end] = at;
        ids[end] = unkId;
      }
    }
    at += charLength;
  }
  const out: Array<[string, number]> = [];
  for (let end = size; end > 0; end = startsAt[end]) {
    out.push([normalized.slice(startsAt[end], end), ids[end]]);
  }
  return out.reverse();
}
