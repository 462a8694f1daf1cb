/**
 * `tf.variableGrads` with the memory of the backward pass freed as it goes. tfjs' engine keeps
 * every tensor the tape saved and every intermediate gradient until the whole backward pass ends
 * (tape.ts' `backpropagateGradients` disposes neither), so a training step peaks at its last
 * kernel with the forward pass' saved tensors and all the gradients of every activation alive at
 * once. Walking the same tape here, a node's saved tensors are disposed once its gradient is
 * computed, and an activation's gradient once the node that made the activation has used it (the
 * tape is in execution order: by then every consumer has added its part). The arithmetic is
 * tfjs' own: the same nodes, gradient functions and order of accumulation.
 *
 * This reads the engine's tape (`tf.engine()`'s internal state, tfjs-core 4.x); where that is not
 * there, or a gradient is already being recorded (higher-order gradients), it is
 * `tf.variableGrads`.
 */
import * as tf from '@tensorflow/tfjs-core';

interface TapeNode {
  id: number;
  kernelName: string;
  inputs: Record<string, tf.Tensor>;
  outputs: tf.Tensor[];
  saved?: tf.Tensor[];
  gradient?: (dys: (tf.Tensor | null)[]) => Record<string, () => tf.Tensor>;
}

interface EngineInternals {
  state: {gradientDepth: number; activeTape: TapeNode[] | null};
  startTape(): void;
  endTape(): void;
  scopedRun<T>(start: () => void, end: () => void, f: () => T): T;
  tidy<T extends tf.TensorContainer>(name: string, f: () => T): T;
}

function engineInternals(): EngineInternals | null {
  const e = tf.engine() as unknown as Partial<EngineInternals>;
  const ok =
    e.state != null &&
    typeof e.state.gradientDepth === 'number' &&
    e.state.gradientDepth === 0 &&
    typeof e.startTape === 'function' &&
    typeof e.endTape === 'function' &&
    typeof e.scopedRun === 'function' &&
    typeof e.tidy === 'function';
  return ok ? (e as EngineInternals) : null;
}

/** The nodes on a path from `xs` to `y`, their inputs pruned to those from `xs` (tape.ts'). */
function filteredNodes(tape: TapeNode[], xs: tf.Tensor[], y: tf.Tensor): TapeNode[] {
  const fromX = new Set(xs.map((x) => x.id));
  const nodesFromX = new Set<number>();
  for (const node of tape) {
    if (Object.values(node.inputs).some((t) => fromX.has(t.id))) {
      node.outputs.forEach((o) => fromX.add(o.id));
      nodesFromX.add(node.id);
    }
  }
  const toY = new Set([y.id]);
  const nodesToY = new Set<number>();
  for (let i = tape.length - 1; i >= 0; i--) {
    const node = tape[i];
    if (node.outputs.some((o) => toY.has(o.id))) {
      Object.values(node.inputs).forEach((t) => toY.add(t.id));
      nodesToY.add(node.id);
    }
  }
  return tape
    .filter((n) => nodesFromX.has(n.id) && nodesToY.has(n.id))
    .map((n) => ({
      ...n,
      inputs: Object.fromEntries(Object.entries(n.inputs).filter(([, t]) => fromX.has(t.id))),
    }));
}

/** The gradients of `y` with respect to `xs` (null where none), freeing as it goes. */
function backprop(nodes: TapeNode[], xs: tf.Tensor[], y: tf.Tensor): (tf.Tensor | null)[] {
  const wanted = new Set(xs.map((x) => x.id));
  const acc = new Map<number, tf.Tensor>([[y.id, tf.keep(tf.onesLike(y))]]);
  try {
    for (let i = nodes.length - 1; i >= 0; i--) {
      const node = nodes[i];
      if (node.gradient == null) {
        throw new Error(
          `Cannot compute gradient: gradient function not found for ${node.kernelName}.`,
        );
      }
      const gradient = node.gradient;
      const dys = node.outputs.map((o) => acc.get(o.id) ?? null);
      tf.tidy(() => {
        const inputGradients = gradient(dys);
        for (const [name, x] of Object.entries(node.inputs)) {
          if (!(name in inputGradients)) {
            throw new Error(
              `Cannot backprop through input ${name}. Available gradients found: ` +
                `${Object.keys(inputGradients)}.`,
            );
          }
          let dx = tf.tidy(() => inputGradients[name]());
          if (dx.dtype !== 'float32') {
            throw new Error(
              `Error in gradient for op ${node.kernelName}. The gradient of input ${name} must ` +
                `have 'float32' dtype, but has '${dx.dtype}'`,
            );
          }
          if (dx.shape.join() !== x.shape.join()) {
            throw new Error(
              `Error in gradient for op ${node.kernelName}. The gradient of input '${name}' has ` +
                `shape '${dx.shape}', which does not match the shape of the input '${x.shape}'`,
            );
          }
          // a gradient function may hand back dy or a saved tensor itself, or one tensor for two
          // inputs: each
          // accumulated gradient is a tensor of its own, disposed on its own
          if (
            dys.includes(dx) ||
            (node.saved ?? []).includes(dx) ||
            [...acc.values()].includes(dx)
          ) {
            dx = tf.clone(dx);
          }
          const current = acc.get(x.id);
          acc.set(x.id, tf.keep(current == null ? dx : tf.add(current, dx)));
          current?.dispose();
        }
      });
      // every consumer of this node's outputs came later on the tape: their gradients are done
      for (const o of node.outputs) {
        if (wanted.has(o.id)) continue;
        acc.get(o.id)?.dispose();
        acc.delete(o.id);
      }
      node.saved?.forEach((t) => t.dispose());
    }
    return xs.map((x) => {
      const g = acc.get(x.id) ?? null;
      acc.delete(x.id);
      return g;
    });
  } finally {
    acc.forEach((t) => t.dispose());
  }
}

/**
 * The value of `f` and its gradients with respect to `xs` (in their order; zeros where `f` does
 * not depend on one), as `tf.variableGrads` computes them, with the backward pass' tensors freed
 * as soon as nothing later needs them. The caller disposes the value and the gradients.
 */
export function leanVariableGrads(
  f: () => tf.Scalar,
  xs: tf.Variable[],
): {value: tf.Scalar; grads: tf.Tensor[]} {
  const engine = engineInternals();
  if (engine == null) {
    const {value, grads} = tf.variableGrads(f, xs);
    return {value, grads: xs.map((x) => grads[x.name] ?? tf.zerosLike(x))};
  }
  const y = engine.scopedRun(
    () => engine.startTape(),
    () => engine.endTape(),
    () => engine.tidy('forward', f),
  );
  const tape = engine.state.activeTape ?? [];
  try {
    if (!(y instanceof tf.Tensor) || y.rank !== 0) {
      throw new Error('leanVariableGrads: f must return a scalar tensor');
    }
    const grads = backprop(filteredNodes(tape, xs, y), xs, y);
    return {value: y, grads: grads.map((g, i) => g ?? tf.zerosLike(xs[i]))};
  } catch (e) {
    tf.dispose(y);
    throw e;
  } finally {
    for (const node of tape) node.saved?.forEach((t) => t.dispose());
    if (engine.state.gradientDepth === 0) engine.state.activeTape = null;
  }
}
