/**
 * The compile rules of tfjs' own built-in layers (Dense, LayerNormalization, Add, Multiply,
 * Activation, the dropouts, Embedding) for the compiled decoding step (generate/step_program.ts).
 * tfjs keeps their weights as properties (kernel, bias, gamma, beta, embeddings).
 */
import {StepActivation} from '../../kernels/step_kernels_api';
import type {GraphLayer} from '../../layers/engine/contract';
import type {StepCompile, StepDecline, StepWeight, StepWeightSource} from '../step_program';

/** A built-in layer's weight variable (tfjs keeps them as properties: kernel, bias, gamma, ...), or null. */
function weightOf(layer: GraphLayer, name: string): StepWeightSource | null {
  const w = (layer as unknown as Record<string, unknown>)[name] as
    StepWeightSource | null | undefined;
  return w != null && typeof (w as {read?: unknown}).read === 'function' ? w : null;
}

/** The weight `name` in the step, null when the layer has none, or the decline. */
function stepWeight(
  emit: Parameters<StepCompile>[2],
  layer: GraphLayer,
  name: string,
): StepWeight | null | StepDecline {
  const source = weightOf(layer, name);
  return source == null ? null : emit.weight(source);
}

const declined = (w: unknown): w is StepDecline =>
  typeof w === 'object' && w != null && 'declined' in w;

/** tfjs' Dense: `act(x · kernel + bias)`. */
export const compileDense: StepCompile = (layer, [x], emit) => {
  const c = layer.getConfig();
  const act = emit.activation(c.activation);
  if (act == null) return {declined: `its activation '${String(c.activation)}' does not compile`};
  const kernel = stepWeight(emit, layer, 'kernel');
  const bias = stepWeight(emit, layer, 'bias');
  if (kernel == null) return {declined: 'it has no kernel (not built)'};
  if (declined(kernel)) return kernel;
  if (declined(bias)) return bias;
  return [emit.dense(x, kernel, bias, c.units as number, act)];
};

/** tfjs' LayerNormalization over the last axis. */
export const compileLayerNorm: StepCompile = (layer, [x], emit) => {
  const c = layer.getConfig();
  const axis = Array.isArray(c.axis) && c.axis.length === 1 ? c.axis[0] : c.axis;
  if (axis !== -1 && axis !== 2)
    return {declined: `its axis ${JSON.stringify(c.axis)} is not the last`};
  const gamma = stepWeight(emit, layer, 'gamma');
  const beta = stepWeight(emit, layer, 'beta');
  if (declined(gamma)) return gamma;
  if (declined(beta)) return beta;
  return [emit.layerNorm(x, gamma, beta, c.epsilon as number)];
};

/** tfjs' Add (`add`) and Multiply (`mul`) over any number of inputs. */
export const compileMerge =
  (op: 'add' | 'mul'): StepCompile =>
  (_layer, inputs, emit) => [inputs.slice(1).reduce((a, b) => emit[op](a, b), inputs[0])];

/** tfjs' Activation layer. */
export const compileActivation: StepCompile = (layer, [x], emit) => {
  const name = layer.getConfig().activation;
  const act = emit.activation(name);
  if (act == null) return {declined: `its activation '${String(name)}' does not compile`};
  return [act === StepActivation.None ? x : emit.activate(x, act)];
};

/** Identity at inference (predict passes no `training`). */
export const compileIdentity: StepCompile = (_layer, inputs) => inputs;

/** tfjs' Embedding: the table's rows at the ids. */
export const compileEmbedding: StepCompile = (layer, [ids], emit) => {
  const table = stepWeight(emit, layer, 'embeddings');
  if (table == null) return {declined: 'it has no embeddings (not built)'};
  if (declined(table)) return table;
  return [emit.gather(ids, table, layer.getConfig().outputDim as number)];
};
