/**
 * keras-hub 0.32's split of a text before byte-pair merging, as its tf.data path does it
 * (`split_strings_for_bpe` in keras_hub/src/tokenizers/byte_pair_tokenizer.py), for GPT2Tokenizer,
 * Llama3Tokenizer and BytePairTokenizer alike. RE2 has no lookahead, so keras-hub emulates GPT-2's
 * `\s+(?!\S)` with a marker, `६` (U+096C):
 *
 * 1. `( )([^\s{SW}])` -> `६\1\2`: a marker before each space that a non-space follows;
 * 2. `(\s{SW})$` -> `\1६` (a sequence, not a class: only a text ending in whitespace then
 *    U+00A0 U+2009 U+202F U+3000 gets a marker);
 * 3. the text ends at its first NUL (tensorflow-text's regex_split stops there; keras-hub drops
 *    the rest of the text);
 * 4. each unsplittable token in turn: the pieces are cut around it, and it is replaced by
 *    `Ĵ` and its index spelled in letters (`ĴA`, `ĴB`, ...);
 * 5. tensorflow-text's `regex_split` with SPLIT_PATTERN_1 (matches and the text between them
 *    are pieces), then with SPLIT_PATTERN_2 (a piece's last character, when it is whitespace
 *    other than a newline, or the marker, is cut off);
 * 6. the replacements of step 4 undone (in every piece, in order), pieces equal to `६` dropped.
 *
 * SW is keras-hub's "special whitespace" U+00A0 U+2009 U+202F U+3000; RE2's `\s` is
 * `[\t\n\f\r ]` and its `$` is the end of the text only.
 */

/** RE2's `\s`. */
const RE2_SPACE = '\\t\\n\\f\\r ';
/** keras-hub's SPECIAL_WHITESPACES. */
const SPECIAL_SPACES = '\\xa0\\u2009\\u202f\\u3000';
/** keras-hub's marker, U+096C DEVANAGARI DIGIT SIX. */
const MARK = '\u096c';

interface Patterns {
  beforeWord: RegExp;
  atEnd: RegExp;
  /** SPLIT_PATTERN_1 without its whitespace alternative (sticky: matched at one position). */
  first: RegExp;
  /** SPLIT_PATTERN_1's first alternatives, in its order. */
  contractions: readonly string[];
}

let patterns: Patterns | undefined;

/** keras-hub's regexes in JavaScript's syntax (built on first use). */
function kerasHubPatterns(): Patterns {
  if (patterns === undefined) {
    const other = `[^${RE2_SPACE}\\p{L}\\p{N}${SPECIAL_SPACES}]+`;
    patterns = {
      beforeWord: new RegExp(`( )([^${RE2_SPACE}${SPECIAL_SPACES}])`, 'gu'),
      atEnd: new RegExp(`([${RE2_SPACE}]${SPECIAL_SPACES})$`, 'u'),
      first: new RegExp(` ?\\p{L}+| ?\\p{N}+| ?${other}`, 'uy'),
      contractions: ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"],
    };
  }
  return patterns;
}

/** keras-hub's stand-in for the unsplittable token at `index`: `Ĵ` and the digits as letters. */
export function unsplittableStandIn(index: number): string {
  return 'Ĵ' + [...String(index)].map((d) => String.fromCharCode(65 + Number(d))).join('');
}

/** RE2's `\s` and keras-hub's special spaces: the class `[\s{SW}]` of SPLIT_PATTERN_1. */
function isSpace(c: number): boolean {
  return (
    c === 0x20 ||
    c === 0x09 ||
    c === 0x0a ||
    c === 0x0c ||
    c === 0x0d ||
    c === 0xa0 ||
    c === 0x2009 ||
    c === 0x202f ||
    c === 0x3000
  );
}

/** SPLIT_PATTERN_2's class `[ \t\r\f\v६{SW}]` (then `$`). */
function endsPiece(c: number): boolean {
  return (
    c === 0x20 ||
    c === 0x09 ||
    c === 0x0d ||
    c === 0x0c ||
    c === 0x0b ||
    c === 0x096c ||
    c === 0xa0 ||
    c === 0x2009 ||
    c === 0x202f ||
    c === 0x3000
  );
}

/** The class `[\n\r\t\f६{SW}]` that ends SPLIT_PATTERN_1's whitespace alternative. */
function endsSpaceRun(c: number): boolean {
  return c !== 0x20 && (isSpace(c) || c === 0x096c);
}

/**
 * tensorflow-text's `regex_split(text, SPLIT_PATTERN_1, SPLIT_PATTERN_1)`: the matches and the
 * text between them, in order, empty pieces left out. RE2 matches in linear time; a
 * backtracking engine would take quadratic time on the whitespace alternative
 * `[\s{SW}]+[\n\r\t\f६{SW}]` over a long run of spaces that it does not match (at each
 * position of the run it would try every shorter prefix), so that alternative is matched here
 * from a table built in one pass: its match at a position of a whitespace run ends at the marker
 * just after the run, else at the run's last character of the end class (not the first one).
 */
function splitFirst(
  text: string,
  first: RegExp,
  contractions: readonly string[],
  out: string[],
): void {
  const n = text.length;
  // For each position in a whitespace run: where the run ends, and its last end-class index.
  const runEnd = new Int32Array(n);
  const lastEnd = new Int32Array(n);
  for (let i = n - 1; i >= 0; i--) {
    const c = text.charCodeAt(i);
    if (!isSpace(c)) continue;
    const inRun = i + 1 < n && isSpace(text.charCodeAt(i + 1));
    runEnd[i] = inRun ? runEnd[i + 1] : i + 1;
    const later = inRun ? lastEnd[i + 1] : -1;
    lastEnd[i] = later >= 0 ? later : endsSpaceRun(c) ? i : -1;
  }
  let gap = 0;
  let p = 0;
  while (p < n) {
    let end = -1;
    const c = text.charCodeAt(p);
    if (c === 0x27) {
      for (const contraction of contractions) {
        if (text.startsWith(contraction, p)) {
          end = p + contraction.length;
          break;
        }
      }
    }
    if (end < 0 && isSpace(c)) {
      const e = runEnd[p];
      if (e < n && text.charCodeAt(e) === 0x096c) end = e + 1;
      else if (p + 1 < n && lastEnd[p + 1] > p && lastEnd[p + 1] < e) end = lastEnd[p + 1] + 1;
    }
    if (end < 0) {
      first.lastIndex = p;
      const match = first.exec(text);
      if (match !== null) end = p + match[0].length;
    }
    if (end < 0) {
      // no alternative here: the character joins the text between matches
      p += c >= 0xd800 && c <= 0xdbff && p + 1 < n ? 2 : 1;
      continue;
    }
    if (p > gap) out.push(text.slice(gap, p));
    out.push(text.slice(p, end));
    p = end;
    gap = end;
  }
  if (n > gap) out.push(text.slice(gap));
}

/** Cuts `text` around each occurrence of `token`, the token replaced by `standIn`. */
function cutAround(text: string, token: string, standIn: string, out: string[]): void {
  let position = 0;
  for (;;) {
    const at = text.indexOf(token, position);
    if (at < 0) break;
    if (at > position) out.push(text.slice(position, at));
    out.push(standIn);
    position = at + token.length;
  }
  if (position < text.length) out.push(text.slice(position));
}

/**
 * The pieces keras-hub 0.32's tf.data path merges for `text` (add_prefix_space already applied):
 * a piece equal to an unsplittable token is that token.
 */
export function kerasHubSplit(text: string, unsplittableTokens: readonly string[]): string[] {
  const {beforeWord, atEnd, first, contractions} = kerasHubPatterns();
  let marked = text.replace(beforeWord, `${MARK}$1$2`).replace(atEnd, `$1${MARK}`);
  const nul = marked.indexOf('\0');
  if (nul >= 0) marked = marked.slice(0, nul);
  let pieces = [marked];
  const standIns = unsplittableTokens.map((_, i) => unsplittableStandIn(i));
  unsplittableTokens.forEach((token, i) => {
    if (token === '') return;
    const cut: string[] = [];
    for (const piece of pieces) cutAround(piece, token, standIns[i], cut);
    pieces = cut;
  });
  const split: string[] = [];
  for (const piece of pieces) splitFirst(piece, first, contractions, split);
  const out: string[] = [];
  const restore = (piece: string): void => {
    let restored = piece;
    if (standIns.length > 0 && piece.includes('Ĵ')) {
      standIns.forEach((standIn, i) => {
        if (restored.includes(standIn))
          restored = restored.split(standIn).join(unsplittableTokens[i]);
      });
    }
    if (restored !== MARK) out.push(restored);
  };
  for (const piece of split) {
    // SPLIT_PATTERN_2: a last character of its class (each one UTF-16 unit) becomes a piece
    const last = piece.length - 1;
    if (last > 0 && endsPiece(piece.charCodeAt(last))) {
      restore(piece.slice(0, last));
      restore(piece.slice(last));
    } else {
      restore(piece);
    }
  }
  return out;
}
