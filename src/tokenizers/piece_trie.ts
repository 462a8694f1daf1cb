/**
 * A trie of byte strings (byte_string.ts) to ids: SentencePiece's user-defined symbols (matched
 * before anything else, longest first) and a unigram model's pieces (every piece that starts at a
 * position), as sentencepiece's tries of them answer.
 */
interface TrieNode {
  id: number;
  children: Map<number, TrieNode> | undefined;
}

export class PieceTrie {
  private readonly root: TrieNode = {id: -1, children: undefined};
  private count = 0;

  /** Adds `key` (a non-empty byte string) with `id`; a key already there keeps its first id. */
  add(key: string, id: number): void {
    let node = this.root;
    for (let i = 0; i < key.length; i++) {
      const c = key.charCodeAt(i);
      node.children ??= new Map();
      let next = node.children.get(c);
      if (next === undefined) {
        next = {id: -1, children: undefined};
        node.children.set(c, next);
      }
      node = next;
    }
    if (node.id < 0) {
      node.id = id;
      this.count++;
    }
  }

  /** The number of keys. */
  get size(): number {
    return this.count;
  }

  /** Calls `found(length, id)` for each key that is a prefix of `s` from `at`, shortest first. */
  prefixes(s: string, at: number, found: (length: number, id: number) => void): void {
    let node: TrieNode | undefined = this.root;
    for (let i = at; i < s.length; i++) {
      node = node.children?.get(s.charCodeAt(i));
      if (node === undefined) return;
      if (node.id >= 0) found(i - at + 1, node.id);
    }
  }

  /** The length of the longest key that is a prefix of `s` from `at`, 0 when none is. */
  longestPrefix(s: string, at: number): number {
    let longest = 0;
    this.prefixes(s, at, (length) => {
      longest = length;
    });
    return longest;
  }
}
