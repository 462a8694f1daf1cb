/**
 * Parsing and validation of einsum equations (numpy semantics).
 *
 * An equation such as `'abc,cde->abde'` is turned into one list of axis labels per operand plus
 * the output labels. Letters are labels; an ellipsis `...` stands for the leading (or middle)
 * broadcast dimensions and is expanded into internal labels `'…0'`, `'…1'`, ... aligned from the
 * right across operands, as numpy does.
 */

/** One axis label: a letter, or an internal ellipsis label such as `'…0'`. */
export type Label = string;

/** A parsed, shape-checked equation. */
export interface EinsumSpec {
  /** Labels of each operand's axes, in axis order. */
  inputs: Label[][];
  /** Labels of the output's axes, in axis order. */
  output: Label[];
  /** Size of every label (after broadcasting ellipsis dimensions). */
  sizes: Map<Label, number>;
}

const ELLIPSIS = '...';

function fail(equation: string, problem: string): never {
  throw new Error(`einsum: invalid equation '${equation}': ${problem}`);
}

/** One operand's (or the output's) subscripts. */
export interface Term {
  /** The letters, in axis order (the ellipsis left out). */
  letters: string[];
  /** Index in `letters` before which the ellipsis sits, or -1 without ellipsis. */
  ellipsisAt: number;
}

/** An equation's terms, before any shape is known. */
export interface EquationTerms {
  /** One term per operand. */
  inputs: Term[];
  /** The output's term, or null in implicit mode (no `->`). */
  output: Term | null;
}

/**
 * The one einsum-equation parser of the package (einsum, EinsumDense's shape analysis, and
 * whoever reads an equation's axes): an equation such as `'...ab,bc->...ac'` as its terms.
 * Whitespace is not allowed here (`parseEinsum` removes it first, as numpy ignores it).
 *
 * @param shown the equation as errors name it (default `equation`).
 * @throws Error naming the equation and what is wrong with it: a repeated index in one term,
 *   a stray '.', '-' or '>', a character other than letters, more than one '->' or ellipsis.
 */
export function parseEquation(equation: string, shown = equation): EquationTerms {
  const arrowParts = equation.split('->');
  if (arrowParts.length > 2) {
    fail(shown, "it has more than one '->'");
  }
  const lhs = arrowParts[0];
  if (/[-<>]/.test(lhs) || (arrowParts.length === 2 && /[-<>]/.test(arrowParts[1]))) {
    fail(shown, "'-' and '>' may only appear together as '->'");
  }
  const inputs = lhs.split(',').map((t, i) => parseTerm(shown, t, `operand ${i} ('${t}')`));
  const output =
    arrowParts.length === 2
      ? parseTerm(shown, arrowParts[1], `the output ('${arrowParts[1]}')`)
      : null;
  return {inputs, output};
}

function parseTerm(equation: string, term: string, what: string): Term {
  const letters: string[] = [];
  let ellipsisAt = -1;
  for (let i = 0; i < term.length;) {
    const ch = term[i];
    if (term.startsWith(ELLIPSIS, i)) {
      if (ellipsisAt !== -1) {
        fail(equation, `${what} has more than one ellipsis`);
      }
      ellipsisAt = letters.length;
      i += ELLIPSIS.length;
    } else if (/^[a-zA-Z]$/.test(ch)) {
      letters.push(ch);
      i += 1;
    } else if (ch === '.') {
      fail(equation, `${what} has a '.' that is not part of an ellipsis '...'`);
    } else {
      fail(equation, `${what} has the character '${ch}'; expected letters a-z, A-Z or '...'`);
    }
  }
  const seen = new Set<string>();
  for (const l of letters) {
    if (seen.has(l)) {
      fail(
        equation,
        `${what} repeats the index '${l}' (diagonals and traces are not supported; ` +
          `take them with tf ops before einsum)`,
      );
    }
    seen.add(l);
  }
  return {letters, ellipsisAt};
}

function ellipsisLabels(count: number, maxCount: number): Label[] {
  // Right-aligned: an operand with `count` ellipsis dims uses the last `count` of `maxCount`.
  const labels: Label[] = [];
  for (let i = maxCount - count; i < maxCount; i++) {
    labels.push(`…${i}`);
  }
  return labels;
}

function expandTerm(term: Term, ellipsis: Label[]): Label[] {
  if (term.ellipsisAt === -1) {
    return [...term.letters];
  }
  return [
    ...term.letters.slice(0, term.ellipsisAt),
    ...ellipsis,
    ...term.letters.slice(term.ellipsisAt),
  ];
}

function describeLabel(label: Label): string {
  return label.startsWith('…') ? `ellipsis dimension ${label.slice(1)}` : `index '${label}'`;
}

/**
 * Parses `equation` for operands of the given shapes and checks ranks and sizes.
 *
 * @throws Error naming the equation and what is wrong with it.
 */
export function parseEinsum(equation: string, shapes: number[][]): EinsumSpec {
  if (typeof equation !== 'string') {
    throw new Error(`einsum: expected the equation to be a string, received ${typeof equation}`);
  }
  const eq = equation.replace(/\s+/g, '');
  if (eq.length === 0) {
    fail(equation, 'it is empty');
  }
  const arrowParts = eq.split('->');
  const terms = arrowParts[0].split(',');
  const arrowsFine = arrowParts.length <= 2 && !/[-<>]/.test(arrowParts.join(''));
  if (arrowsFine && terms.length !== shapes.length) {
    fail(
      equation,
      `it names ${terms.length} operand${terms.length === 1 ? '' : 's'} but ` +
        `${shapes.length} tensor${shapes.length === 1 ? ' was' : 's were'} given`,
    );
  }
  const {inputs: parsed, output: outTerm} = parseEquation(eq, equation);

  // Ranks and the number of dimensions each ellipsis covers.
  const ellipsisCounts = parsed.map((term, i) => {
    const rank = shapes[i].length;
    const named = term.letters.length;
    if (term.ellipsisAt === -1) {
      if (rank !== named) {
        fail(
          equation,
          `operand ${i} has rank ${rank} (shape [${shapes[i]}]) but its subscripts ` +
            `'${terms[i]}' name ${named} ax${named === 1 ? 'is' : 'es'}`,
        );
      }
      return 0;
    }
    if (rank < named) {
      fail(
        equation,
        `operand ${i} has rank ${rank} (shape [${shapes[i]}]) but its subscripts ` +
          `'${terms[i]}' name at least ${named} axes`,
      );
    }
    return rank - named;
  });
  const maxEllipsis = Math.max(0, ...ellipsisCounts);
  const inputs = parsed.map((term, i) =>
    expandTerm(term, ellipsisLabels(ellipsisCounts[i], maxEllipsis)),
  );

  // Sizes: letters must agree exactly; ellipsis dimensions broadcast (1 against n).
  const sizes = new Map<Label, number>();
  inputs.forEach((labels, i) => {
    labels.forEach((label, axis) => {
      const size = shapes[i][axis];
      const known = sizes.get(label);
      if (known === undefined) {
        sizes.set(label, size);
      } else if (known !== size) {
        const broadcastable = label.startsWith('…') && (known === 1 || size === 1);
        if (!broadcastable) {
          fail(
            equation,
            `${describeLabel(label)} has size ${known} in an earlier operand but size ` +
              `${size} in operand ${i} (shape [${shapes[i]}])`,
          );
        }
        sizes.set(label, Math.max(known, size));
      }
    });
  });

  let output: Label[];
  if (outTerm != null) {
    const all = new Set(inputs.flat());
    for (const l of outTerm.letters) {
      if (!all.has(l)) {
        fail(equation, `the output index '${l}' does not appear in any operand`);
      }
    }
    output = expandTerm(outTerm, ellipsisLabels(maxEllipsis, maxEllipsis));
  } else {
    // Implicit mode: broadcast dims, then the letters that appear exactly once, sorted.
    const counts = new Map<string, number>();
    for (const term of parsed) {
      for (const l of term.letters) {
        counts.set(l, (counts.get(l) ?? 0) + 1);
      }
    }
    const once = [...counts.entries()]
      .filter(([, n]) => n === 1)
      .map(([l]) => l)
      .sort();
    output = [...ellipsisLabels(maxEllipsis, maxEllipsis), ...once];
  }
  return {inputs, output, sizes};
}
