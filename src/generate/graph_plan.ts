/**
 * Whether a functional causal LM (int32 ids `[batch, T]` -> logits `[batch, T, vocab]`) can be
 * run incrementally, one token at a time, by interpreting its graph: every node is either
 * position-wise (run on the new positions alone), position-aware (run with `startIndex`) or a
 * causal self-attention with a key / value cache (run with the cache and its update index).
 * Anything else gives a reason, and `generate` recomputes the prefix instead.
 */
import {SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayersModel} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import type {CachedDecoding} from '../layers/engine/contract';
import {
  decodingOf,
  GraphLayer,
  GraphNode,
  keepsKerasMaskExactly,
  makesKerasMask,
} from './layer_rules';

export type StepKind = 'positionWise' | 'positionAware' | 'cached';

/** One node of the graph and how it runs in a step. */
export interface PlannedNode {
  layer: GraphLayer;
  node: GraphNode;
  kind: StepKind;
  /** The recorded call options, less `mask` and `training` (predict passes neither). */
  kwargs: Kwargs;
  /** For `cached` nodes: the layer's cached decoding (its contract) and its config. */
  cache?: {entry: CachedDecoding; config: Record<string, unknown>};
  /** Fed rows `[batch * t, features]` in a step (see `PositionWiseDecoding.flattenRows`). */
  flattenRows?: boolean;
}

/** The nodes from the ids input to the logits, in an order where inputs come first. */
export interface StepPlan {
  input: SymbolicTensor;
  /** A padding mask input, left out of the steps (all ones at the known positions), or null. */
  padding: SymbolicTensor | null;
  output: SymbolicTensor;
  nodes: PlannedNode[];
  /**
   * The ids feed a `maskZero` embedding whose Keras mask reaches attention. The stepper keeps a
   * key mask of the cache (0 where a position holds the id 0) and hands it to the cached layers
   * that read Keras masks, in place of the masks of a step's new positions (see `cachedStep` in
   * generate.ts for a step whose newest id is 0).
   */
  masksZeroIds: boolean;
  /**
   * With `masksZeroIds`: false where the mask reaches attention through a layer other than the
   * package's (`keepsKerasMaskExactly`): the key mask may not stand for what `predict` computes,
   * so such a model decodes with a cache only while no known id is 0, and recomputes after.
   */
  zeroKeysExact: boolean;
  /**
   * With `masksZeroIds`: a layer that masks query rows reads the mask (`masksQueries`), so a step
   * whose newest id is 0 is recomputed; otherwise only a step where a row's known ids are all 0
   * (its query sees no key) is.
   */
  zeroQueries: boolean;
}

export type PlanResult = {plan: StepPlan; reason: null} | {plan: null; reason: string};

function nodeOf(t: SymbolicTensor): GraphNode {
  const layer = t.sourceLayer as unknown as GraphLayer;
  return layer.inboundNodes[t.nodeIndex];
}

function describeLayer(layer: GraphLayer): string {
  return `layer '${layer.name}' (${layer.getClassName()})`;
}

/**
 * Plans the incremental run of `model`, or says why it cannot be run incrementally (then the
 * prefix must be recomputed at each step).
 */
export function planCachedDecoding(model: LayersModel): PlanResult {
  const fail = (reason: string): PlanResult => ({plan: null, reason});
  // a second input is a keras-hub padding mask: generate feeds it all ones at the known
  // positions, so the decoders that read it as their key padding mask run without it
  const second = model.inputs.length === 2 ? model.inputs[1] : null;
  const padding = second != null && second.rank === 2 && second.dtype !== 'float32' ? second : null;
  if (model.inputs.length !== 1 && padding == null) {
    return fail(
      `the model has ${model.inputs.length} inputs; cached decoding needs ids alone, or ids ` +
        'and a padding mask [batch, T]',
    );
  }
  if (model.outputs.length !== 1) {
    return fail(
      `the model has ${model.outputs.length} outputs; cached decoding needs logits alone`,
    );
  }
  const [input] = model.inputs;
  const [output] = model.outputs;
  if (input.rank !== 2 || output.rank !== 3) {
    return fail(
      `the model maps [${input.shape.join(', ')}] to [${output.shape.join(', ')}], not ids ` +
        `[batch, T] to logits [batch, T, vocab]`,
    );
  }
  // depth-first from the logits: a node after the nodes of its inputs
  const order: GraphNode[] = [];
  const seen = new Set<GraphNode>();
  const visit = (t: SymbolicTensor, path: Set<GraphNode>): string | null => {
    if (t === input || t === padding) return null;
    const node = nodeOf(t);
    if (node == null) return `the tensor '${t.name}' has no recorded source`;
    if (seen.has(node)) return null;
    if (path.has(node)) return `the graph has a cycle at ${describeLayer(node.outboundLayer)}`;
    if (node.inputTensors.length === 0) {
      return `the model has another input, '${t.name}' (${describeLayer(node.outboundLayer)})`;
    }
    path.add(node);
    for (const x of node.inputTensors) {
      const r = visit(x, path);
      if (r != null) return r;
    }
    path.delete(node);
    seen.add(node);
    order.push(node);
    return null;
  };
  const cycle = visit(output, new Set());
  if (cycle != null) return fail(cycle);
  const masked = new Set<number>(); // ids of symbolic tensors that carry a Keras mask
  const garbled = new Set<number>(); // ... whose mask passed a layer a cache cannot follow
  let masksZeroIds = false;
  let zeroKeysExact = true;
  let zeroQueries = false;
  let zeroMaskOnly = true; // every Keras mask so far comes from a mask_zero embedding of the ids
  const nodes: PlannedNode[] = [];
  for (const node of order) {
    const layer = node.outboundLayer;
    const cls = layer.getClassName();
    const what = describeLayer(layer);
    const config = layer.getConfig();
    const inMasked = node.inputTensors.some((x) => masked.has(x.id));
    const decoding = decodingOf(cls);
    // a padding mask input that a cached step can leave out: the model's own, in the role the
    // layer's cached decoding names
    const paddingRole = decoding?.kind === 'cached' ? decoding.paddingMaskRole : null;
    if (
      paddingRole != null &&
      node.inputTensors.length === 2 &&
      node.inputTensors[1].dtype !== 'float32' &&
      node.inputTensors[1] !== padding
    ) {
      return fail(`${what}: it takes a mask that is not the model's padding mask input`);
    }
    if (padding != null && node.inputTensors.includes(padding)) {
      const roles = (config.inputRoles ?? config.input_roles) as string[] | undefined;
      const asKeyPadding =
        paddingRole != null &&
        node.inputTensors.length === 2 &&
        node.inputTensors[1] === padding &&
        roles?.[1] === paddingRole;
      if (!asKeyPadding) {
        return fail(
          `${what}: it reads the padding mask input other than as the key padding mask its ` +
            'cached decoding names (e.g. decoderPaddingMask), the only use a cached step can ' +
            'leave out',
        );
      }
    }
    const kwargs: Kwargs = {...(node.callArgs ?? {})};
    delete kwargs.mask;
    delete kwargs.training;
    let planned: PlannedNode;
    if (decoding?.kind === 'cached') {
      const why = decoding.refuse(config, node);
      if (why != null) return fail(`${what}: ${why}`);
      if (inMasked && decoding.readsKerasMasks && !zeroMaskOnly) {
        return fail(
          `${what}: its input carries a Keras mask (from a Masking layer, or a mask_zero ` +
            `embedding not fed by the ids), which it reads as a padding mask; a cache holds no mask`,
        );
      }
      if (inMasked && decoding.readsKerasMasks) {
        masksZeroIds = true;
        zeroQueries = zeroQueries || decoding.masksQueries !== false;
        if (node.inputTensors.some((x) => garbled.has(x.id))) zeroKeysExact = false;
      }
      planned = {layer, node, kind: 'cached', kwargs, cache: {entry: decoding, config}};
    } else if (decoding?.kind === 'positionAware' || decoding?.kind === 'positionWise') {
      const why = decoding.check(config, node);
      if (why != null) return fail(`${what}: ${why}`);
      planned = {layer, node, kind: decoding.kind, kwargs};
      if (decoding.kind === 'positionWise' && decoding.flattenRows === true) {
        planned.flattenRows = node.inputTensors.length === 1 && node.inputTensors[0].rank === 3;
      }
    } else if (decoding?.kind === 'refused') {
      return fail(`${what}: ${decoding.reason}`);
    } else if ('layers' in layer) {
      return fail(`${what}: a nested model, whose layers a step cannot see into`);
    } else {
      return fail(`${what}: not known to compute each position alone (no cached rule for it)`);
    }
    if (makesKerasMask(cls, config, node)) {
      // a mask_zero embedding of the ids: the stepper's key mask stands for it (see masksZeroIds)
      const ofIds = cls !== 'Masking' && node.inputTensors[0] === input;
      zeroMaskOnly = zeroMaskOnly && ofIds;
    }
    if (inMasked || makesKerasMask(cls, config, node)) {
      for (const t of node.outputTensors) masked.add(t.id);
    }
    if (
      node.inputTensors.some((x) => garbled.has(x.id)) ||
      (inMasked && !keepsKerasMaskExactly(cls))
    ) {
      for (const t of node.outputTensors) garbled.add(t.id);
    }
    nodes.push(planned);
  }
  return {
    plan: {input, padding, output, nodes, masksZeroIds, zeroKeysExact, zeroQueries},
    reason: null,
  };
}

/** Why `model` cannot be decoded with a cache, or null when `generate` can use one. */
export function cachedDecodingRefusal(model: LayersModel): string | null {
  return planCachedDecoding(model).reason;
}
