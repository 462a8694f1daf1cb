/**
 * The merge loop of byte-pair encoding in O(n log n): the adjacent pairs that have a rank wait in
 * a priority queue ordered by (rank, position), as Hugging Face's tokenizers and tiktoken order
 * theirs, so each merge costs a queue operation instead of a scan of the whole piece.
 */

/**
 * The merge rules over vocabulary ids: the rank of a pair of ids and the id of what it merges
 * to. Ids of one vocabulary are unique ({@link BytePairTokenizer} refuses duplicates), so a
 * pair of ids names one pair of strings.
 */
export class MergeTable {
  private readonly pairRanks = new Map<number, number>();
  private readonly mergedIds: Int32Array;
  private readonly size: number;

  /**
   * `ranks`: `"left right"` -> rank (both tokens in `vocabulary`); `size`: one more than the
   * largest id.
   */
  constructor(
    ranks: ReadonlyMap<string, number>,
    vocabulary: ReadonlyMap<string, number>,
    size: number,
  ) {
    this.size = size;
    let most = 0;
    for (const rank of ranks.values()) most = Math.max(most, rank + 1);
    this.mergedIds = new Int32Array(most);
    for (const [rule, rank] of ranks) {
      const space = rule.indexOf(' ');
      const left = vocabulary.get(rule.slice(0, space)) as number;
      const right = vocabulary.get(rule.slice(space + 1)) as number;
      this.pairRanks.set(left * size + right, rank);
      this.mergedIds[rank] =
        vocabulary.get(rule.slice(0, space) + rule.slice(space + 1)) ?? -2 - rank;
    }
  }

  private rank(left: number, right: number): number | undefined {
    return left < 0 || right < 0 ? undefined : this.pairRanks.get(left * this.size + right);
  }

  /**
   * Merges the ids of one piece's byte symbols as keras-hub's BytePairTokenizer does:
   * repeatedly the adjacent pair of lowest rank, the leftmost one among equal ranks, until no
   * adjacent pair has a rank. An id < 0 never merges; a merge whose result is not in the
   * vocabulary gives `-2 - rank`.
   */
  merge(symbols: readonly number[]): number[] {
    const n = symbols.length;
    if (n < 2) return [...symbols];
    const ids = Int32Array.from(symbols);
    // A doubly linked list over the symbols; a merged symbol keeps the left one's position.
    const next = new Int32Array(n);
    const prev = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      next[i] = i + 1 < n ? i + 1 : -1;
      prev[i] = i - 1;
    }
    const alive = new Uint8Array(n).fill(1);
    const queue = new PairQueue(n);
    for (let i = 0; i + 1 < n; i++) {
      const rank = this.rank(ids[i], ids[i + 1]);
      if (rank !== undefined) queue.push(rank, i);
    }
    while (queue.size > 0) {
      const rank = queue.topRank();
      const at = queue.pop();
      const right = next[at];
      // An entry is stale once either symbol has changed: the pair's rank then differs (a rank
      // names one pair).
      if (alive[at] === 0 || right < 0 || this.rank(ids[at], ids[right]) !== rank) continue;
      ids[at] = this.mergedIds[rank];
      alive[right] = 0;
      const after = next[right];
      next[at] = after;
      if (after >= 0) prev[after] = at;
      const before = prev[at];
      if (before >= 0) {
        const r = this.rank(ids[before], ids[at]);
        if (r !== undefined) queue.push(r, before);
      }
      if (after >= 0) {
        const r = this.rank(ids[at], ids[after]);
        if (r !== undefined) queue.push(r, at);
      }
    }
    const out: number[] = [];
    for (let i = 0; i >= 0; i = next[i]) out.push(ids[i]);
    return out;
  }
}

/** A binary min-heap of (rank, position) pairs in typed arrays; it grows as needed. */
class PairQueue {
  private ranks: Float64Array;
  private positions: Int32Array;
  size = 0;

  constructor(capacity: number) {
    this.ranks = new Float64Array(Math.max(capacity, 4));
    this.positions = new Int32Array(Math.max(capacity, 4));
  }

  topRank(): number {
    return this.ranks[0];
  }

  private less(i: number, j: number): boolean {
    const a = this.ranks[i];
    const b = this.ranks[j];
    return a < b || (a === b && this.positions[i] < this.positions[j]);
  }

  private swap(i: number, j: number): void {
    const r = this.ranks[i];
    this.ranks[i] = this.ranks[j];
    this.ranks[j] = r;
    const p = this.positions[i];
    this.positions[i] = this.positions[j];
    this.positions[j] = p;
  }

  push(rank: number, position: number): void {
    if (this.size === this.ranks.length) {
      const ranks = new Float64Array(this.size * 2);
      ranks.set(this.ranks);
      this.ranks = ranks;
      const positions = new Int32Array(this.size * 2);
      positions.set(this.positions);
      this.positions = positions;
    }
    let i = this.size++;
    this.ranks[i] = rank;
    this.positions[i] = position;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  /** Removes the smallest entry and returns its position. */
  pop(): number {
    const top = this.positions[0];
    this.size--;
    if (this.size > 0) {
      this.ranks[0] = this.ranks[this.size];
      this.positions[0] = this.positions[this.size];
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < this.size && this.less(l, m)) m = l;
        if (r < this.size && this.less(r, m)) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
    }
    return top;
  }
}
