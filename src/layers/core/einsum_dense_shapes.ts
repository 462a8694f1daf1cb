/**
 * Keras' `_analyze_einsum_string` for EinsumDense: from the equation, the bias axes, the input
 * shape and the requested output shape, derive the kernel, bias and full output shapes.
 */

export type Dim = number | null;

export interface EinsumDenseShapes {
  kernelShape: number[];
  biasShape: number[] | null;
  /** The full output shape, batch axis included. */
  outputShape: Dim[];
}

function fail(equation: string, problem: string): never {
  throw new Error(`EinsumDense: invalid equation '${equation}': ${problem}`);
}

/**
 * @param equation `X,Y->Z`, `...X,Y->...Z` or `X...,Y->Z...` with letters only otherwise.
 * @param biasAxes letters of Z that carry a bias, or null.
 * @param inputShape the full input shape, batch included.
 * @param outputShape the output shape without the batch axis (null entries: taken from input).
 */
export function analyzeEinsumDense(
  equation: string,
  biasAxes: string | null,
  inputShape: Dim[],
  outputShape: Dim[],
): EinsumDenseShapes {
  const eq = equation.replace(/\.\.\./g, '0');
  let m = /^([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)$/.exec(eq);
  let leftElided = false;
  let rightElided = false;
  if (m == null) {
    m = /^0([a-zA-Z]+),([a-zA-Z]+)->0([a-zA-Z]+)$/.exec(eq);
    leftElided = m != null;
  }
  if (m == null) {
    m = /^([a-zA-Z]{2,})0,([a-zA-Z]+)->([a-zA-Z]+)0$/.exec(eq);
    rightElided = m != null;
  }
  if (m == null) {
    fail(
      equation,
      'equations must be of the form X,Y->Z, ...X,Y->...Z or X...,Y->Z... (X, Y, Z letters)',
    );
  }
  const [, inputSpec, weightSpec, outputSpec] = m;
  const elided = inputShape.length - inputSpec.length;
  if (elided < 0 || (elided > 0 && !leftElided && !rightElided)) {
    fail(
      equation,
      `the input has rank ${inputShape.length} (shape [${inputShape.map(String)}]) but '${inputSpec}' ` +
        `names ${inputSpec.length} axes`,
    );
  }
  if (outputShape.length !== outputSpec.length - 1 && !(leftElided || rightElided)) {
    fail(
      equation,
      `outputShape [${outputShape.map(String)}] must give the ${outputSpec.length - 1} non-batch ` +
        `axes of '${outputSpec}'`,
    );
  }
  // Full output shape in axis order (Keras lists left-elided dims in reverse: we do not).
  let full: Dim[];
  let inputAxis: (i: number) => number;
  let outputAxis: (i: number) => number;
  if (leftElided) {
    full = [inputShape[0], ...inputShape.slice(1, elided), ...outputShape];
    inputAxis = (i) => i + elided;
    outputAxis = (i) => i + elided;
  } else {
    full = [
      inputShape[0],
      ...outputShape,
      ...(elided > 0 ? inputShape.slice(inputShape.length - elided) : []),
    ];
    inputAxis = (i) => i;
    outputAxis = (i) => i;
  }
  if (full.length !== outputSpec.length + elided) {
    fail(
      equation,
      `outputShape [${outputShape.map(String)}] gives ${full.length - elided} output axes with the batch ` +
        `axis, but '${outputSpec}' has ${outputSpec.length}`,
    );
  }
  const inputDim = new Map<string, Dim>();
  [...inputSpec].forEach((c, i) => inputDim.set(c, inputShape[inputAxis(i)]));
  const outputPos = new Map<string, number>();
  [...outputSpec].forEach((c, i) => outputPos.set(c, outputAxis(i)));

  for (const c of inputSpec) {
    const pos = outputPos.get(c);
    if (pos !== undefined) {
      const want = full[pos];
      const have = inputDim.get(c) ?? null;
      if (want != null && have != null && want !== have) {
        fail(
          equation,
          `input dimension '${c}' is ${have} but the requested output shape has ${want} there`,
        );
      }
      if (want == null) {
        full[pos] = have;
      }
    }
  }
  for (const c of outputSpec) {
    if (!inputSpec.includes(c) && !weightSpec.includes(c)) {
      fail(
        equation,
        `output dimension '${c}' appears in neither the input '${inputSpec}' nor the weight '${weightSpec}'`,
      );
    }
  }
  const kernelShape = [...weightSpec].map((c) => {
    const pos = outputPos.get(c);
    const fromOutput = pos !== undefined ? full[pos] : null;
    const dim = fromOutput ?? inputDim.get(c) ?? null;
    if (dim == null) {
      fail(
        equation,
        `the size of weight dimension '${c}' is unknown: give it in outputShape or in the input shape`,
      );
    }
    return dim;
  });

  let biasShape: number[] | null = null;
  if (biasAxes != null && biasAxes !== '') {
    for (const c of biasAxes) {
      if (!outputSpec.includes(c)) {
        fail(equation, `bias axis '${c}' is not an output dimension of '${outputSpec}'`);
      }
    }
    const first = Math.min(...[...biasAxes].map((c) => outputSpec.indexOf(c)));
    biasShape = [...outputSpec.slice(first)].map((c) => {
      if (!biasAxes.includes(c)) {
        return 1;
      }
      const dim = full[outputPos.get(c) as number];
      if (dim == null) {
        fail(equation, `the size of bias axis '${c}' is unknown`);
      }
      return dim;
    });
    if (!leftElided) {
      for (let i = 0; i < elided; i++) {
        biasShape.push(1);
      }
    }
  }
  return {kernelShape, biasShape, outputShape: full};
}

/**
 * For an equation of the dense form `FB,BO->FO` (letters only, each once per operand, F, B and
 * O disjoint, B non-empty), the number of contracted trailing input axes |B|; else null.
 */
export function denseBoundAxes(equation: string): number | null {
  const m = /^([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)$/.exec(equation);
  if (m == null) return null;
  const [, x, y, z] = m;
  for (let k = 1; k <= x.length; k++) {
    const f = x.slice(0, x.length - k);
    const b = x.slice(x.length - k);
    if (!y.startsWith(b)) continue;
    const o = y.slice(k);
    const letters = f + b + o;
    if (z === f + o && new Set(letters).size === letters.length) return k;
  }
  return null;
}
