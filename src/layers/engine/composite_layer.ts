/**
 * A layer made of sublayers (MultiHeadAttention's projections, later the transformer blocks): it
 * builds them, owns their weights (trained, saved, regularised, frozen and disposed with it) and
 * names every weight explicitly `<layer>/<sublayer>/<weight>`, the Keras layout, so names are the
 * same whether the layer is built by `apply` (inside tfjs' name scope) or by a direct `build`.
 */
import * as tf from '@tensorflow/tfjs-core';
import {layers, LayerVariable} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {RegularizerFn} from '@tensorflow/tfjs-layers/dist/types';

import {Shape} from './shapes';
import {
  int4BlockSizeOf,
  QuantizationMode,
  quantizationModeOf,
  quantizedConfig,
  quantizedForm,
} from '../core/quantization';

type AddWeightArgs = Parameters<layers.Layer['addWeight']>;

function lastSegment(name: string): string {
  return name.slice(name.lastIndexOf('/') + 1);
}

function rename(v: LayerVariable, name: string): void {
  // tfjs saves and loads weights by originalName; it is set once here, before any save
  (v as {originalName: string}).originalName = name;
}

/**
 * The base of a layer made of sublayers: `addSublayer(layer, inputShape)` in `build` builds a
 * sublayer and makes its weights this layer's own, named `<layer>/<sublayer>/<weight>` (Keras'
 * layout), trained, saved, frozen and disposed with it; `sublayers` lists them in build order. The
 * package's multi-head attention and transformer blocks extend it, and so may a model family's
 * own layers (ARCHITECTURE.md, "Adding a model family").
 */
export abstract class CompositeLayer extends layers.Layer {
  private readonly sublayerList: layers.Layer[] = [];
  /** Each own weight's name as given to addWeight. */
  private readonly ownNames = new Map<LayerVariable, string>();
  private fastInit = false;
  /**
   * `'int8'`: its sublayers are built in Keras 3's int8 form (EinsumDense, ReversibleEmbedding
   * with int8 weights; tfjs Dense / Embedding as QuantizedDense / QuantizedEmbedding), as
   * `quantize(model, 'int8')` makes them; null: float. Set before build.
   */
  quantizationMode: QuantizationMode | null;
  /** `'int4'`: the sublayers' int4 block size (-1: per channel). */
  int4BlockSize: number;

  constructor(
    args: LayerArgs & {quantizationMode?: QuantizationMode | null; int4BlockSize?: number} = {},
  ) {
    super(args);
    this.quantizationMode = quantizationModeOf(args?.quantizationMode, this.getClassName());
    this.int4BlockSize = int4BlockSizeOf(args?.int4BlockSize, this.getClassName());
  }

  /** The sublayers, in build order (which is also the weight order). */
  get sublayers(): readonly layers.Layer[] {
    return this.sublayerList;
  }

  /** Weights by their path below this layer (`scale`, `query/kernel`, `block/query/kernel`). */
  weightPaths(): Map<string, LayerVariable> {
    const out = new Map<string, LayerVariable>();
    for (const [v, name] of this.ownNames) out.set(name, v);
    for (const s of this.sublayerList) {
      if (s instanceof CompositeLayer) {
        for (const [p, v] of s.weightPaths()) out.set(`${s.name}/${p}`, v);
      } else {
        for (const v of s.weights) out.set(`${s.name}/${lastSegment(v.originalName)}`, v);
      }
    }
    return out;
  }

  override addWeight(...args: AddWeightArgs): LayerVariable {
    const v = super.addWeight(...args);
    this.ownNames.set(v, args[0]);
    rename(v, `${this.name}/${args[0]}`);
    return v;
  }

  /**
   * Builds `layer` for `inputShape` as a sublayer of this one (with this layer's trainable and
   * fast-init settings) and names its weights `<this>/<layer>/...`. Call it from `build`.
   */
  protected addSublayer<L extends layers.Layer>(given: L, inputShape: Shape | Shape[]): L {
    const layer = (
      this.quantizationMode == null
        ? given
        : quantizedForm(given, this.quantizationMode, this.int4BlockSize)
    ) as L;
    if (this.sublayerList.some((s) => s.name === layer.name)) {
      throw new Error(`Layer '${this.name}': two sublayers named '${layer.name}'`);
    }
    layer.trainable = this.trainable;
    layer.setFastWeightInitDuringBuild(this.fastInit);
    layer.build(inputShape);
    layer.built = true;
    this.sublayerList.push(layer);
    const paths =
      layer instanceof CompositeLayer
        ? [...layer.weightPaths()].map(([p, v]) => [v, p] as const)
        : layer.weights.map((v) => [v, lastSegment(v.originalName)] as const);
    for (const [v, p] of paths) rename(v, `${this.name}/${layer.name}/${p}`);
    return layer;
  }

  /** The config, with `quantizationMode` when quantized (and `int4BlockSize` when int4). */
  override getConfig(): tf.serialization.ConfigDict {
    const config = super.getConfig();
    return this.quantizationMode == null
      ? config
      : quantizedConfig(config, this.quantizationMode, this.int4BlockSize);
  }

  /** Whether the layer and its sublayers train. */
  override get trainable(): boolean {
    return super.trainable;
  }

  /** Sets `trainable` on the layer and on every sublayer. */
  override set trainable(value: boolean) {
    super.trainable = value;
    for (const s of this.sublayerList ?? []) s.trainable = value;
  }

  /** The trainable weights of the layer and its sublayers (none when `trainable` is false). */
  override get trainableWeights(): LayerVariable[] {
    if (!this.trainable) return [];
    return super.trainableWeights.concat(
      ...(this.sublayerList ?? []).map((s) => s.trainableWeights),
    );
  }

  /** Sets the layer's own trainable weights. */
  override set trainableWeights(weights: LayerVariable[]) {
    super.trainableWeights = weights;
  }

  /** The non-trainable weights of the layer and its sublayers. */
  override get nonTrainableWeights(): LayerVariable[] {
    return super.nonTrainableWeights.concat(
      ...(this.sublayerList ?? []).map((s) => s.nonTrainableWeights),
    );
  }

  /** Sets the layer's own non-trainable weights. */
  override set nonTrainableWeights(weights: LayerVariable[]) {
    super.nonTrainableWeights = weights;
  }

  /** The regularization losses of the layer and its sublayers. */
  override get losses(): RegularizerFn[] {
    return super.losses.concat(...(this.sublayerList ?? []).map((s) => s.losses));
  }

  /** Passes the fast weight initialization setting on to the sublayers too. */
  override setFastWeightInitDuringBuild(value: boolean): void {
    super.setFastWeightInitDuringBuild(value);
    this.fastInit = value;
    for (const s of this.sublayerList ?? []) s.setFastWeightInitDuringBuild(value);
  }
}
