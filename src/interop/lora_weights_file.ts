/**
 * keras-hub's LoRA adapters file (`backbone.save_lora_weights("x.lora.h5")`,
 * `load_lora_weights`): an HDF5 file of `lora/vars/rank` (an int64 scalar) and, for each adapted
 * layer, `lora/<i>/vars/lora_kernel_a` and `.../lora_kernel_b` (float32), where `<i>` numbers the
 * layer among the backbone's layers that have weights, in Keras' `_flatten_layers` order
 * (layers/engine/keras_layer_order.ts).
 */
import * as tf from '@tensorflow/tfjs-core';
import type {layers} from '@tensorflow/tfjs-layers';

import {Hdf5Reader, isHdf5} from '../io/hdf5_datasets';
import {Hdf5Group, writeHdf5} from '../io/hdf5_writer';
import {kerasWeightedLayers} from '../layers/engine/keras_layer_order';
import {isLoraLayer, LoraLayer} from '../layers/core/lora';
import {enableLora, loraLayersOf, loraRankOf} from '../layers/core/lora_model';

const bytesOf = (values: Float32Array) =>
  new Uint8Array(values.buffer, values.byteOffset, values.byteLength);

/**
 * The bytes of a `.lora.h5` file of `model`'s adapters (after {@link enableLora}), which
 * keras-hub's `backbone.load_lora_weights` reads into the same backbone.
 *
 * @example
 * ```ts
 * enableLora(model, 4);
 * const bytes = await saveLoraWeights(model); // write them to 'adapters.lora.h5'
 * ```
 */
export async function saveLoraWeights(model: layers.Layer): Promise<Uint8Array> {
  const rank = loraRankOf(model);
  const adapted = loraLayersOf(model);
  if (rank == null || adapted.length === 0) {
    throw new Error(
      `saveLoraWeights: '${model?.name}' has no LoRA layers; call enableLora(model, rank) first`,
    );
  }
  const rankBytes = new Uint8Array(8);
  new DataView(rankBytes.buffer).setBigInt64(0, BigInt(rank), true);
  const lora: Hdf5Group = {vars: {rank: {shape: [], dtype: 'int64', data: rankBytes}}};
  for (const {index, layer} of adapted) {
    const w = layer.lora;
    if (w == null) {
      throw new Error(`saveLoraWeights: LoRA was disabled on layer '${layer.name}' since`);
    }
    if (w.kind !== 'kernel') throw new Error(embeddingRefused('saveLoraWeights', layer));
    const [a, b] = await Promise.all([w.a.read().data(), w.b.read().data()]);
    lora[String(index)] = {
      vars: {
        lora_kernel_a: {
          shape: w.a.shape as number[],
          dtype: 'float32',
          data: bytesOf(a as Float32Array),
        },
        lora_kernel_b: {
          shape: w.b.shape as number[],
          dtype: 'float32',
          data: bytesOf(b as Float32Array),
        },
      },
    };
  }
  return writeHdf5({lora});
}

function fail(message: string): never {
  throw new Error(`loadLoraWeights: ${message}`);
}

/**
 * The refusal of an adapted embedding: keras-hub 0.32's `save_lora_weights` and
 * `load_lora_weights` read each layer's `lora_kernel_a` / `lora_kernel_b`, which an Embedding's
 * LoRA (`lora_embeddings_a` / `lora_embeddings_b`) does not have: keras-hub fails there
 * (AttributeError), so no `.lora.h5` holds them.
 */
function embeddingRefused(where: string, layer: LoraLayer): string {
  return (
    `${where}: layer '${layer.name}' has LoRA on an embedding table (lora_embeddings_a / _b), ` +
    "which keras-hub's .lora.h5 files cannot hold (its save_lora_weights and load_lora_weights " +
    "read lora_kernel_a / _b only); save the model's weights instead (LoRA merged)"
  );
}

/**
 * Reads a `.lora.h5` file (keras-hub's `save_lora_weights`, or {@link saveLoraWeights}) into
 * `model`: LoRA is enabled with the file's rank when the model has none (keras-hub's targets),
 * and must have that rank when it has; each adapted layer's A and B are set from the file.
 */
export async function loadLoraWeights(
  model: layers.Layer,
  source: Uint8Array | ArrayBuffer,
): Promise<void> {
  const bytes = source instanceof ArrayBuffer ? new Uint8Array(source) : source;
  if (!(bytes instanceof Uint8Array) || !isHdf5(bytes)) {
    fail('expected the bytes of a .lora.h5 file (HDF5), received something else');
  }
  const reader = await Hdf5Reader.open(bytes, 'the .lora.h5 file');
  const read = (path: string): {shape: number[]; values: Float32Array | Int32Array} => {
    const ds = reader.dataset(path);
    const out = new Uint8Array(ds.bytes);
    reader.copy(ds, out, 0);
    const values = ds.dtype === 'int32' ? new Int32Array(out.buffer) : new Float32Array(out.buffer);
    return {shape: ds.shape, values};
  };
  if (!reader.isGroup('/lora') || !reader.has('/lora/vars', 'rank')) {
    fail("the file has no 'lora/vars/rank': it is not a keras-hub LoRA weights file");
  }
  const rank = read('/lora/vars/rank').values[0];
  const had = loraRankOf(model);
  if (had == null) enableLora(model, rank);
  else if (had !== rank) {
    fail(`the file's LoRA rank is ${rank}, but the model's LoRA was enabled with rank ${had}`);
  }
  const adapted = loraLayersOf(model);
  const inFile = reader.keys('/lora').filter((k) => k !== 'vars');
  const expected = adapted.map((e) => String(e.index));
  const missing = expected.filter((k) => !inFile.includes(k));
  const extra = inFile.filter((k) => !expected.includes(k));
  if (missing.length > 0 || extra.length > 0) {
    const weighted = kerasWeightedLayers(model);
    const name = (k: string) => `${k} (${weighted[Number(k)]?.name ?? 'no such layer'})`;
    fail(
      `the file adapts the layers ${inFile.map(name).join(', ')}; the model's LoRA layers are ` +
        `${expected.map(name).join(', ')} (layers numbered among those with weights, as keras-hub does)`,
    );
  }
  const values: [LoraLayer, 'a' | 'b', tf.Tensor][] = [];
  try {
    for (const {index, layer} of adapted) {
      if (!isLoraLayer(layer) || layer.lora == null) fail(`layer '${layer.name}' lost its LoRA`);
      if (layer.lora.kind !== 'kernel') throw new Error(embeddingRefused('loadLoraWeights', layer));
      for (const part of ['a', 'b'] as const) {
        const v = layer.lora[part];
        const {shape, values: data} = read(`/lora/${index}/vars/lora_kernel_${part}`);
        if (shape.join() !== v.shape.join()) {
          fail(
            `lora/${index}/vars/lora_kernel_${part} has shape [${shape}]; layer '${layer.name}' ` +
              `expects [${v.shape}]`,
          );
        }
        values.push([layer, part, tf.tensor(data, shape, 'float32')]);
      }
    }
    for (const [layer, part, t] of values) layer.lora?.[part].write(t);
  } finally {
    tf.dispose(values.map((v) => v[2]));
    reader.close();
  }
}
