/**
 * A keras-hub preset's `model.weights.h5` written from a model loaded from one: the backbone's
 * weights at their Keras 3 paths (`layers/<layer>/.../vars/<i>`, as `save_to_preset` writes
 * them), each adapted layer's kernel with LoRA's update merged in and A and B left out, as Keras
 * saves a model with LoRA. With the preset's other files (config.json, task.json, tokenizer and
 * preprocessor files, assets) beside it, keras-hub's `from_preset` loads the fine-tuned model.
 */
import type {LayersModel, LayerVariable} from '@tensorflow/tfjs-layers';

import {Hdf5Dtype, Hdf5Group, writeHdf5} from '../io/hdf5_writer';
import {keras3LayerPaths} from '../layers/engine/keras3_paths';
import {mergedNamedWeights} from '../layers/core/lora_model';
import {HEAD_LAYERS} from '../hub_models/build';

const DTYPES: Partial<Record<string, Hdf5Dtype>> = {
  float32: 'float32',
  int32: 'int32',
  bool: 'int8', // the package's int8 weights, held as bytes (ops/int8.ts)
};

/**
 * The bytes of `model.weights.h5` for a keras-hub preset of `model` (a model `loadKerasHubPreset`
 * returned, fine-tuned or not): its backbone's weights, LoRA merged.
 *
 * @example
 * ```ts
 * // after finetune(preset, text): copy the preset's folder, then replace its weights
 * fs.writeFileSync('tuned/model.weights.h5', await kerasHubWeightsFile(preset.model));
 * ```
 */
export async function kerasHubWeightsFile(model: LayersModel): Promise<Uint8Array> {
  const merged = mergedNamedWeights(model);
  try {
    const byName = new Map((merged?.named ?? []).map((n) => [n.name, n.tensor]));
    const backbone = model.layers.filter((l) => !HEAD_LAYERS.has(l.name));
    const root: Hdf5Group = {};
    for (const [p, variable] of keras3LayerPaths(backbone)) {
      const value = byName.get(variable.originalName) ?? (variable as LayerVariable).read();
      const dtype = DTYPES[value.dtype];
      if (dtype == null) {
        throw new Error(
          `kerasHubWeightsFile: the weight '${variable.originalName}' is ${value.dtype}; ` +
            'expected float32, int32 or int8 bytes',
        );
      }
      const data = await value.data();
      const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice();
      let group = root;
      const parts = p.split('/');
      for (const part of parts.slice(0, -1)) group = (group[part] ??= {}) as Hdf5Group;
      group[parts[parts.length - 1]] = {shape: value.shape as number[], dtype, data: bytes};
    }
    return writeHdf5(root);
  } finally {
    merged?.dispose();
  }
}
