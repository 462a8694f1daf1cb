/**
 * SentencePiece's BPE model (bpe_model.cc) on a normalized byte string: the text split into
 * characters (a user-defined symbol is one symbol, never merged), then the adjacent pair whose
 * joined piece has the highest score merged first (ties: the leftmost), until no joined pair is a
 * piece; a piece of type UNUSED is split back into the two symbols it was merged from.
 */
import {oneCharLength} from './byte_string';
import type {PieceTrie} from './piece_trie';

/** What a model needs of the vocabulary: ids, scores and types by piece (byte strings). */
export interface PieceTable {
  /** Normal, user-defined and unused pieces -> id (sentencepiece's `pieces_`). */
  readonly pieces: ReadonlyMap<string, number>;
  /** Each id's score. */
  readonly scores: Float32Array;
  /** Each id's type (sentence_piece_model.ts' PieceType). */
  readonly types: Uint8Array;
  /** The user-defined symbols (sentencepiece's prefix matcher), or undefined when none. */
  readonly userDefined: PieceTrie | undefined;
}

/** A candidate merge: the symbols at `left` and `right` joined, with the joined piece's score. */
interface Pair {
  left: number;
  right: number;
  score: number;
  size: number;
}

/** Whether `a` is merged before `b`: the higher score, then the leftmost. */
const before = (a: Pair, b: Pair): boolean =>
  a.score > b.score || (a.score === b.score && a.left < b.left);

/** A binary heap of pairs, the next merge on top. */
class PairQueue {
  private readonly heap: Pair[] = [];
  get size(): number {
    return this.heap.length;
  }
  push(p: Pair): void {
    const h = this.heap;
    let i = h.push(p) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i], h[parent])) break;
      [h[i], h[parent]] = [h[parent], h[i]];
      i = parent;
    }
  }
  pop(): Pair {
    const h = this.heap;
    const top = h[0];
    const last = h.pop() as Pair;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < h.length && before(h[l], h[best])) best = l;
        if (r < h.length && before(h[r], h[best])) best = r;
        if (best === i) break;
        [h[i], h[best]] = [h[best], h[i]];
        i = best;
      }
    }
    return top;
  }
}

const UNUSED = 5;

/**
 * The pieces of a normalized byte string (byte strings), as sentencepiece's BPE `Encode`; the
 * caller looks up their ids (a piece that is not in the vocabulary is unknown).
 */
export function bpeEncode(normalized: string, table: PieceTable): string[] {
  if (normalized.length === 0) return [];
  const pieces: string[] = [];
  const frozen: boolean[] = [];
  for (let at = 0; at < normalized.length;) {
    const user = table.userDefined?.longestPrefix(normalized, at) ?? 0;
    const length =
      user > 0 ? user : Math.min(oneCharLength(normalized.charCodeAt(at)), normalized.length - at);
    pieces.push(normalized.substr(at, length));
    frozen.push(user > 0);
    at += length;
  }
  const n = pieces.length;
  const prev = Int32Array.from({length: n}, (_, i) => i - 1);
  const next = Int32Array.from({length: n}, (_, i) => (i + 1 < n ? i + 1 : -1));
  const queue = new PairQueue();
  const unusedSplits = new Map<string, [string, string]>();
  const maybeAdd = (left: number, right: number): void => {
    if (left === -1 || right === -1 || frozen[left] || frozen[right]) return;
    const joined = pieces[left] + pieces[right];
    const id = table.pieces.get(joined);
    if (id === undefined) return;
    queue.push({left, right, score: table.scores[id], size: joined.length});
    if (table.types[id] === UNUSED) unusedSplits.set(joined, [pieces[left], pieces[right]]);
  };
  for (let i = 1; i < n; i++) maybeAdd(i - 1, i);
  while (queue.size > 0) {
    const top = queue.pop();
    const left = pieces[top.left];
    const right = pieces[top.right];
    if (left.length === 0 || right.length === 0 || left.length + right.length !== top.size) {
      continue;
    }
    pieces[top.left] = left + right;
    next[top.left] = next[top.right];
    if (next[top.right] >= 0) prev[next[top.right]] = top.left;
    pieces[top.right] = '';
    maybeAdd(prev[top.left], top.left);
    maybeAdd(top.left, next[top.left]);
  }
  const out: string[] = [];
  const resegment = (w: string): void => {
    const id = table.pieces.get(w);
    const split = id !== undefined && table.types[id] === UNUSED ? unusedSplits.get(w) : undefined;
    if (split === undefined) {
      out.push(w);
      return;
    }
    resegment(split[0]);
    resegment(split[1]);
  };
  for (let i = 0; i !== -1; i = next[i]) resegment(pieces[i]);
  return out;
}
