import * as tf from '@tensorflow/tfjs-core';

import {Label, parseEinsum} from './einsum_equation';

/** A tensor together with the label of each of its axes. */
interface Labeled {
  x: tf.Tensor;
  labels: Label[];
}

function isIdentity(perm: number[]): boolean {
  return perm.every((p, i) => p === i);
}

function transposeTo(t: Labeled, order: Label[]): tf.Tensor {
  const perm = order.map((l) => t.labels.indexOf(l));
  return isIdentity(perm) ? t.x : tf.transpose(t.x, perm);
}

function product(sizes: Map<Label, number>, labels: Label[]): number {
  return labels.reduce((p, l) => p * (sizes.get(l) as number), 1);
}

/** Sums out the axes whose labels are not in `keep`. */
function sumOut(t: Labeled, keep: Set<Label>): Labeled {
  const axes: number[] = [];
  t.labels.forEach((l, i) => {
    if (!keep.has(l)) {
      axes.push(i);
    }
  });
  if (axes.length === 0) {
    return t;
  }
  return {x: tf.sum(t.x, axes), labels: t.labels.filter((l) => keep.has(l))};
}

/** Drops size-1 ellipsis axes that broadcast against a larger size elsewhere. */
function squeezeBroadcast(t: Labeled, sizes: Map<Label, number>): Labeled {
  const axes: number[] = [];
  t.labels.forEach((l, i) => {
    if (t.x.shape[i] === 1 && (sizes.get(l) as number) > 1) {
      axes.push(i);
    }
  });
  if (axes.length === 0) {
    return t;
  }
  return {x: tf.squeeze(t.x, axes), labels: t.labels.filter((_, i) => !axes.includes(i))};
}

/**
 * Contracts two labeled tensors, keeping the labels in `keep` (in that order) and summing the rest.
 * Lowered to transpose + reshape + (batched) matMul, or a broadcast multiply when nothing is
 * contracted, so it is differentiable and runs on every backend.
 */
function contractPair(a0: Labeled, b0: Labeled, keep: Label[], sizes: Map<Label, number>): Labeled {
  const keepSet = new Set(keep);
  const a1 = squeezeBroadcast(a0, sizes);
  const b1 = squeezeBroadcast(b0, sizes);
  const inA = new Set(a1.labels);
  const inB = new Set(b1.labels);
  // Labels found in one operand only and not kept are summed before the product.
  const a = sumOut(a1, new Set([...a1.labels].filter((l) => keepSet.has(l) || inB.has(l))));
  const b = sumOut(b1, new Set([...b1.labels].filter((l) => keepSet.has(l) || inA.has(l))));
  const bSet = new Set(b.labels);
  const aSet = new Set(a.labels);
  const resultOrder = keep.filter((l) => aSet.has(l) || bSet.has(l));
  const contracted = a.labels.filter((l) => bSet.has(l) && !keepSet.has(l));

  if (contracted.length === 0) {
    // Outer / elementwise product: align both to the result order and multiply.
    const align = (t: Labeled) => {
      const own = resultOrder.filter((l) => t.labels.includes(l));
      const xt = transposeTo(t, own);
      const shape = resultOrder.map((l) => (t.labels.includes(l) ? (sizes.get(l) as number) : 1));
      return tf.reshape(xt, shape);
    };
    return {x: tf.mul(align(a), align(b)), labels: resultOrder};
  }

  const batch = resultOrder.filter((l) => aSet.has(l) && bSet.has(l));
  // The operand whose free labels come first in the result becomes the left matMul operand,
  // so the product lands in the result order without a final transpose where possible.
  const firstFree = resultOrder.find((l) => !batch.includes(l));
  const swap = firstFree !== undefined && !aSet.has(firstFree);
  const left = swap ? b : a;
  const right = swap ? a : b;
  const leftSet = swap ? bSet : aSet;
  const freeL = resultOrder.filter((l) => leftSet.has(l) && !batch.includes(l));
  const freeR = resultOrder.filter((l) => !leftSet.has(l));
  const contr = left.labels.filter((l) => contracted.includes(l));

  const nBatch = product(sizes, batch);
  const m = product(sizes, freeL);
  const k = product(sizes, contr);
  const n = product(sizes, freeR);
  const lead = batch.length > 0 ? [nBatch] : [];

  // Left as [batch, M, K], or [batch, K, M] with transposeA when that needs no transpose.
  const lPlain = [...batch, ...freeL, ...contr];
  const lTrans = [...batch, ...contr, ...freeL];
  const transposeA =
    !isIdentity(lPlain.map((l) => left.labels.indexOf(l))) &&
    isIdentity(lTrans.map((l) => left.labels.indexOf(l)));
  const lx = tf.reshape(
    transposeTo(left, transposeA ? lTrans : lPlain),
    transposeA ? [...lead, k, m] : [...lead, m, k],
  );
  // Right as [batch, K, N], or [batch, N, K] with transposeB when that needs no transpose.
  const rPlain = [...batch, ...contr, ...freeR];
  const rTrans = [...batch, ...freeR, ...contr];
  const transposeB =
    !isIdentity(rPlain.map((l) => right.labels.indexOf(l))) &&
    isIdentity(rTrans.map((l) => right.labels.indexOf(l)));
  const rx = tf.reshape(
    transposeTo(right, transposeB ? rTrans : rPlain),
    transposeB ? [...lead, n, k] : [...lead, k, n],
  );
  const prod = tf.matMul(lx, rx, transposeA, transposeB); // [batch?, M, N]
  const labels = [...batch, ...freeL, ...freeR];
  const y = tf.reshape(
    prod,
    labels.map((l) => sizes.get(l) as number),
  );
  const out: Labeled = {x: y, labels};
  return {x: transposeTo(out, resultOrder), labels: resultOrder};
}

/**
 * Einstein summation, lowered to transpose / reshape / batched `matMul` / `sum`.
 *
 * Unlike `tf.einsum` it is differentiable, runs on every backend (wasm has no Einsum kernel), and
 * accepts any number of operands (contracted left to right), an ellipsis `...` for broadcast
 * dimensions and implicit outputs (`'ij,jk'`), with numpy semantics. Repeated indices within one
 * operand (diagonals, traces) are not supported.
 *
 * ```js
 * const c = einsum('bij,bjk->bik', a, b); // batched matrix product
 * const t = einsum('ij->ji', m);          // transpose
 * ```
 *
 * @param equation the subscripts, e.g. `'abc,cde->abde'`.
 * @param operands the tensors, one per comma-separated term of the equation.
 * @throws Error naming the equation for malformed equations and rank or size mismatches.
 */
export function einsum(equation: string, ...operands: tf.Tensor[]): tf.Tensor {
  if (operands.length === 0) {
    throw new Error(`einsum: equation '${equation}' needs at least one operand, received none`);
  }
  operands.forEach((t, i) => {
    if (!(t instanceof tf.Tensor)) {
      throw new Error(
        `einsum: operand ${i} of '${equation}' must be a tf.Tensor, received ${
          t === null ? 'null' : typeof t
        }`,
      );
    }
  });
  const spec = parseEinsum(
    equation,
    operands.map((t) => t.shape),
  );
  return tf.tidy(() => {
    let acc: Labeled = {x: operands[0], labels: spec.inputs[0]};
    for (let i = 1; i < operands.length; i++) {
      // Keep what the output or a later operand still needs, in output order first.
      const later = new Set(spec.inputs.slice(i + 1).flat());
      const needed = [
        ...spec.output,
        ...[...acc.labels, ...spec.inputs[i]].filter(
          (l, j, all) => later.has(l) && !spec.output.includes(l) && all.indexOf(l) === j,
        ),
      ];
      acc = contractPair(acc, {x: operands[i], labels: spec.inputs[i]}, needed, spec.sizes);
    }
    const reduced = sumOut(squeezeBroadcast(acc, spec.sizes), new Set(spec.output));
    // Broadcast dimensions of size 1 everywhere may be missing after squeezing: restore them.
    const present = spec.output.filter((l) => reduced.labels.includes(l));
    let y = transposeTo(reduced, present);
    const outShape = spec.output.map((l) => spec.sizes.get(l) as number);
    if (present.length !== spec.output.length) {
      y = tf.reshape(
        y,
        spec.output.map((l) => (present.includes(l) ? (spec.sizes.get(l) as number) : 1)),
      );
      y = tf.broadcastTo(y, outShape);
    }
    // Return a new tensor even for identity equations, so callers may dispose the result freely.
    return y === operands[0] ? tf.clone(y) : y;
  });
}
