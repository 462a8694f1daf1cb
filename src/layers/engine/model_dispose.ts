/**
 * `model.dispose()` frees the weights of a layer the model calls more than once (a tied
 * embedding: ids -> vectors and, reversed, vectors -> logits). tfjs counts a reference per
 * symbolic call of a layer but releases one per layer when a model is disposed, so such a layer
 * kept its weights for the life of the process. Before tfjs' own dispose, the references of the
 * model's other calls of each layer are released; a layer that another live model also uses
 * keeps that model's references. Also what a model's `dispose()` releases besides its weights
 * (`onModelDispose`: the compiled step's memory kept with the model).
 */
import {LayersModel} from '@tensorflow/tfjs-layers';

/** What this reads of tfjs' containers and layers (internal fields). */
interface Counted {
  _refCount: number | null;
  inboundNodes: unknown[];
  dispose(): unknown;
}
interface ContainerInternals {
  _refCount: number | null;
  layers: Counted[];
  containerNodes: Set<string>;
}

/** How many of `model`'s nodes call `layer` (tfjs' node keys `<layer>_ib-<index>`). */
function callsIn(model: ContainerInternals, layer: Counted & {name: string}): number {
  let n = 0;
  for (let i = 0; i < layer.inboundNodes.length; i++) {
    if (model.containerNodes.has(`${layer.name}_ib-${i}`)) n += 1;
  }
  return n;
}

/** What a model's `dispose()` also releases (a cache held with the model), by model. */
type DisposeHooks = WeakMap<object, Set<() => void>>;

const original = LayersModel.prototype.dispose;
const marked = original as typeof original & {
  releasesRepeatedCalls?: boolean;
  disposeHooks?: DisposeHooks;
};
if (marked.releasesRepeatedCalls !== true) {
  const hooks: DisposeHooks = new WeakMap();
  const dispose = function (this: LayersModel) {
    const release = hooks.get(this);
    hooks.delete(this);
    for (const f of release ?? []) f();
    const model = this as unknown as ContainerInternals;
    if (model._refCount === 1 && model.containerNodes instanceof Set) {
      for (const layer of model.layers) {
        const extra = callsIn(model, layer as Counted & {name: string}) - 1;
        // one reference stays for tfjs' own dispose below (which then frees the weights)
        for (let i = 0; i < extra && (layer._refCount ?? 0) > 1; i++) layer.dispose();
      }
    }
    return original.call(this);
  };
  Object.assign(dispose, {releasesRepeatedCalls: true, disposeHooks: hooks});
  LayersModel.prototype.dispose = dispose;
}

/** The hooks of the patched dispose (one table, whichever copy of this module patched it). */
const disposeHooks = (LayersModel.prototype.dispose as typeof marked).disposeHooks as DisposeHooks;

/**
 * Calls `release` when `model.dispose()` is next called (before tfjs frees its weights); the
 * function returned takes it back.
 */
export function onModelDispose(model: LayersModel, release: () => void): () => void {
  let set = disposeHooks.get(model);
  if (set == null) {
    set = new Set();
    disposeHooks.set(model, set);
  }
  set.add(release);
  return () => disposeHooks.get(model)?.delete(release);
}
