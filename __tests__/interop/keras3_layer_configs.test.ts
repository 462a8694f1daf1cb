/**
 * The config.json saveKerasFile writes for keras-hub's model families, loaded here from the
 * committed presets, against what Keras 3.15.1 / keras-hub 0.32 write for the same layers:
 * fixtures/keras_save_configs.py -> __tests__/fixtures/keras_save_configs.json (Keras' own
 * serialization of the backbones' layers), and keras-hub's own int8 GPT-2 preset
 * (__tests__/fixtures/int8_files/gpt2_preset/config.json: its DTypePolicyMap). Keras 3.15 loading
 * these files and predicting the same is scale/test_save_keras_file.py's.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {loadKerasHubPreset, saveKerasFile} from '../../src';

const FIXTURES = path.join(__dirname, '..', 'fixtures');
const KERAS = JSON.parse(
  fs.readFileSync(path.join(FIXTURES, 'keras_save_configs.json'), 'utf8'),
) as {
  keras: string;
  gpt2_decoder: {config: Record<string, unknown>};
  bert_encoder: {config: Record<string, unknown>};
  bert_segment_embedding: {class_name: string; config: Record<string, unknown>};
  llama_classes: Record<string, {module: string; registered_name: string}>;
  reverse_call: Array<Record<string, unknown>>;
};

interface LayerEntry {
  module: string;
  class_name: string;
  registered_name: string | null;
  name: string;
  config: Record<string, unknown>;
  inbound_nodes: Array<{kwargs: Record<string, unknown>}>;
}

/** config.json of a stored zip (the format's fields, no zip library). */
function configJson(bytes: Uint8Array): {config: {layers: LayerEntry[]}} {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  while (view.getUint32(at, true) === 0x04034b50) {
    const size = view.getUint32(at + 18, true);
    const nameLength = view.getUint16(at + 26, true);
    const name = new TextDecoder().decode(bytes.subarray(at + 30, at + 30 + nameLength));
    const data = bytes.subarray(at + 30 + nameLength, at + 30 + nameLength + size);
    if (name === 'config.json') return JSON.parse(new TextDecoder().decode(data));
    at += 30 + nameLength + size;
  }
  throw new Error('no config.json in the zip');
}

/** The layers of the config saveKerasFile writes for the preset in `folder`. */
async function savedLayers(folder: string): Promise<LayerEntry[]> {
  const preset = await loadKerasHubPreset(path.join(FIXTURES, folder));
  try {
    const before = tf.memory().numTensors;
    const bytes = await saveKerasFile(preset.model);
    expect(tf.memory().numTensors).toBe(before);
    return configJson(bytes).config.layers;
  } finally {
    preset.dispose();
  }
}

const ofClass = (layers: LayerEntry[], cls: string) => layers.filter((l) => l.class_name === cls);

describe("saveKerasFile's config of keras-hub's families, as Keras 3.15 writes it", () => {
  it("GPT-2: keras-hub's gelu_approximate as Keras serializes it; the reverse call says reverse", async () => {
    expect(KERAS.keras).toBe('3.15.1');
    const layers = await savedLayers('hub_presets/gpt2');
    const decoders = ofClass(layers, 'TransformerDecoder');
    expect(decoders.length).toBe(2);
    for (const d of decoders) {
      // Keras 3.15: keras.activations.get('gelu_approximate') fails ("Could not interpret
      // activation function identifier"); Keras writes keras-hub's registered function
      expect(d.config.activation).toEqual(KERAS.gpt2_decoder.config.activation);
      expect(d.registered_name).toBe('keras_hub>TransformerDecoder');
    }
    const [embedding] = ofClass(layers, 'ReversibleEmbedding');
    // GPT2CausalLM calls its token embedding on ids, then in reverse on the hidden states
    expect(embedding.inbound_nodes.map((n) => n.kwargs)).toEqual(KERAS.reverse_call);
  });

  it("BERT: the segment Embedding holds only keys Keras 3's Embedding takes (no batch_input_shape)", async () => {
    const layers = await savedLayers('hub_presets/bert');
    const [segment] = layers.filter((l) => l.name === 'segment_embedding');
    expect(segment.class_name).toBe(KERAS.bert_segment_embedding.class_name);
    const kerasKeys = Object.keys(KERAS.bert_segment_embedding.config);
    const extra = Object.keys(segment.config).filter((k) => !kerasKeys.includes(k));
    expect(extra).toEqual([]);
    expect(segment.config.mask_zero).toBe(KERAS.bert_segment_embedding.config.mask_zero);
    for (const e of ofClass(layers, 'TransformerEncoder')) {
      expect(e.config.activation).toEqual(KERAS.bert_encoder.config.activation);
    }
  });

  it("Llama 3: keras-hub's unregistered Llama layers under the module and name Keras writes", async () => {
    const layers = await savedLayers('hub_presets/llama3');
    for (const cls of ['LlamaTransformerDecoder', 'LlamaLayerNorm']) {
      const found = ofClass(layers, cls);
      expect(found.length).toBeGreaterThan(0);
      for (const l of found) {
        expect({module: l.module, registered_name: l.registered_name}).toEqual(
          KERAS.llama_classes[cls],
        );
      }
    }
  });

  it("int8 GPT-2: each block's int8 sublayers in a DTypePolicyMap, as keras-hub's int8 preset writes", async () => {
    const preset = JSON.parse(
      fs.readFileSync(path.join(FIXTURES, 'int8_files', 'gpt2_preset', 'config.json'), 'utf8'),
    );
    const hubMap = preset.config.dtype.config.policy_map as Record<string, unknown>;
    const layers = await savedLayers('int8_files/gpt2_preset');
    const decoders = ofClass(layers, 'TransformerDecoder');
    expect(decoders.length).toBe(2);
    for (const d of decoders) {
      const dtype = d.config.dtype as {class_name: string; config: {policy_map: object}};
      expect(dtype.class_name).toBe(preset.config.dtype.class_name);
      const expected = Object.fromEntries(
        Object.entries(hubMap).filter(([p]) => p.startsWith(`${d.name}/`)),
      );
      expect(Object.keys(expected).length).toBe(6);
      expect(dtype.config.policy_map).toEqual(expected);
    }
  });
});
