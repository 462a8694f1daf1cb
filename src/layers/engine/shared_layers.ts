/**
 * A second model over the layers of a first (a preset's backbone over its task's layers): tfjs
 * counts a reference per layer for each model built by calling it, not for a model made later over
 * the same symbolic tensors, so disposing either model would free the other's weights. The count
 * is tfjs' own (an internal field, read here and in model_dispose.ts only).
 */
import type {LayersModel} from '@tensorflow/tfjs-layers';

/** What this reads of tfjs' containers and layers (internal fields). */
interface Counted {
  _refCount: number | null;
}

/**
 * Gives each layer of `view` one more reference, so that `view.dispose()` and the other model's
 * `dispose()` each release their own: the weights are freed when both are disposed.
 */
export function shareLayers(view: LayersModel): LayersModel {
  for (const layer of view.layers) {
    const counted = layer as unknown as Counted;
    counted._refCount = (counted._refCount ?? 0) + 1;
  }
  return view;
}

/** Whether a model was disposed (tfjs' containers count references; 0: disposed). */
export function isDisposed(model: LayersModel): boolean {
  return (model as unknown as Counted)._refCount === 0;
}
