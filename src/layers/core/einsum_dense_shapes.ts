/**
 * Keras' `_analyze_einsum_string` for EinsumDense: from the equation, the bias axes, the input
 * shape and the requested output shape, derive the kernel, bias and full output shapes.
 */
import {EquationTerms, parseEquation, Term} from '../../ops/einsum_equation';

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

/** EinsumDense's equation forms: `X,Y->Z`, `...X,Y->...Z`, `X...,Y->Z...` (X of 2+ letters). */
interface DenseForm {
  input: string;
  weight: string;
  output: string;
  leftElided: boolean;
  rightElided: boolean;
}

/** The equation as one of EinsumDense's forms (read by the package's one parser), or null. */
function denseForm(equation: string): DenseForm | null {
  let terms: EquationTerms;
  try {
    terms = parseEquation(equation);
  } catch {
    return null;
  }
  const [x, w] = terms.inputs;
  const z = terms.output;
  if (terms.inputs.length !== 2 || z == null || w.ellipsisAt !== -1) return null;
  if (x.letters.length === 0 || w.letters.length === 0 || z.letters.length === 0) return null;
  const join = (t: Term) => t.letters.join('');
  const form = {input: join(x), weight: join(w), output: join(z)};
  if (x.ellipsisAt === -1 && z.ellipsisAt === -1) {
    return {...form, leftElided: false, rightElided: false};
  }
  if (x.ellipsisAt === 0 && z.ellipsisAt === 0) {
    return {...form, leftElided: true, rightElided: false};
  }
  const atEnd = (t: Term) => t.ellipsisAt === t.letters.length;
  if (atEnd(x) && atEnd(z) && x.letters.length >= 2) {
    return {...form, leftElided: false, rightElided: true};
  }
  return null;
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
  const form = denseForm(equation);
  if (form == null) {
    fail(
      equation,
      'equations must be of the form X,Y->Z, ...X,Y->...Z or X...,Y->Z... (X, Y, Z letters)',
    );
  }
  const {input: inputSpec, weight: weightSpec, output: outputSpec, leftElided, rightElided} = form;
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
  const form = denseForm(equation);
  if (form == null || form.leftElided || form.rightElided) return null;
  const {input: x, weight: y, output: z} = form;
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
