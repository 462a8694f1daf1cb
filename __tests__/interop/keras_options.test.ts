/**
 * The Keras loader's option list comes from the layers' own configs: a model saved by this
 * package with every option of every attention layer set loads through convertKerasArtifacts,
 * and an option no layer writes is refused by name.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  AdditiveAttention,
  Attention,
  convertKerasArtifacts,
  GroupQueryAttention,
  MultiHeadAttention,
} from '../../src';
import {kerasConfigKeys} from '../../src/interop/keras_options';
import {saveToMemory} from '../helpers/save';

function model(): tf.LayersModel {
  const x = tf.input({shape: [4, 6]});
  const m = tf.input({shape: [4, 4], dtype: 'bool'});
  const mha = new MultiHeadAttention({
    numHeads: 2,
    keyDim: 3,
    useGate: true,
    slidingWindow: 2,
    chunkSize: 2,
    softmaxRobustMasking: true,
    returnAttentionScores: false,
    name: 'mha',
  }).apply(x, {attentionMask: m, useCausalMask: true}) as tf.SymbolicTensor;
  const att = new Attention({useScale: true, scoreMode: 'concat', name: 'att'}).apply([mha, x]);
  const add = new AdditiveAttention({useScale: false, name: 'add'}).apply([
    att as tf.SymbolicTensor,
    x,
  ]) as tf.SymbolicTensor;
  const gqa = new GroupQueryAttention({
    headDim: 2,
    numQueryHeads: 4,
    numKeyValueHeads: 2,
    useGate: true,
    slidingWindow: 3,
    name: 'gqa',
  }).apply([add, x], {useCausalMask: true}) as tf.SymbolicTensor;
  return tf.model({inputs: [x, m], outputs: gqa});
}

describe('Keras option list', () => {
  it('accepts every option the layers write (snake_case, as converted models have them)', async () => {
    const original = model();
    const artifacts = await saveToMemory(original);
    const converted = await convertKerasArtifacts(artifacts);
    const loaded = await tf.loadLayersModel(tf.io.fromMemory(converted));
    const inputs = [tf.randomNormal([2, 4, 6], 0, 1, 'float32', 3), tf.ones([2, 4, 4], 'bool')];
    const a = original.predict(inputs) as tf.Tensor;
    const b = loaded.predict(inputs) as tf.Tensor;
    expect(tf.max(tf.abs(tf.sub(a, b))).dataSync()[0]).toBe(0);
    const mha = loaded.getLayer('mha') as MultiHeadAttention;
    expect([mha.useGate, mha.slidingWindow, mha.chunkSize, mha.useCausalMask]).toEqual([
      true,
      2,
      2,
      true,
    ]);
    tf.dispose([...inputs, a, b]);
    original.dispose();
    loaded.dispose();
  });

  it('lists Keras-only keys and refuses the rest by name', async () => {
    expect(kerasConfigKeys('Attention')?.has('causal')).toBe(true);
    expect(kerasConfigKeys('MultiHeadAttention')?.has('sliding_window')).toBe(true);
    expect(kerasConfigKeys('MultiHeadAttention')?.has('causal')).toBe(false);
    // tfjs' own classes carry no contract: their configs are checked by tfjs
    expect(kerasConfigKeys('Dense')).toBeNull();
    const artifacts = await saveToMemory(model());
    const topology = artifacts.modelTopology as {
      config: {layers: Array<{config: Record<string, unknown>; name: string}>};
    };
    const att = topology.config.layers.find((l) => l.name === 'att');
    (att as {config: Record<string, unknown>}).config.num_heads = 3;
    await expect(convertKerasArtifacts(artifacts)).rejects.toThrow(
      "layer 'att' (Attention) has the option 'num_heads' = 3, which this package does not implement",
    );
  });
});

describe('the loader on the options of layers with a contract (not only attention layers)', () => {
  const fixture = path.join(
    __dirname,
    '..',
    'fixtures',
    'keras',
    'k3_hub_rotary_start_index',
    'model.json',
  );
  type Obj = Record<string, unknown>;
  const load = () => {
    const json = JSON.parse(fs.readFileSync(fixture, 'utf8'));
    const artifacts = {
      modelTopology: json.modelTopology,
      weightSpecs: json.weightsManifest.flatMap((g: {weights: unknown[]}) => g.weights),
    };
    const layers = ((json.modelTopology.model_config as Obj).config as Obj).layers as Obj[];
    return {artifacts: artifacts as tf.io.ModelArtifacts, layers};
  };

  it('refuses a keyword argument a position layer does not take, never drops it', async () => {
    const {artifacts, layers} = load();
    const pos = layers.find((l) => l.class_name === 'PositionEmbedding') as Obj;
    ((pos.inbound_nodes as Obj[])[0].kwargs as Obj).scale = 2;
    await expect(convertKerasArtifacts(artifacts)).rejects.toThrow(
      "layer 'position_embedding' (PositionEmbedding) is called with scale=2, which this package " +
        'does not support in a converted model (it takes start_index)',
    );
  });

  it("refuses an option keras-hub's position layers do not have here", async () => {
    const {artifacts, layers} = load();
    const rope = layers.find((l) => l.class_name === 'RotaryEmbedding') as Obj;
    (rope.config as Obj).rope_type = 'yarn';
    await expect(convertKerasArtifacts(artifacts)).rejects.toThrow(
      `layer 'rotary_embedding' (RotaryEmbedding) has rope_type "yarn"; this package implements ` +
        "keras-hub's 'linear' rotary embedding (scaling_factor) only",
    );
    (rope.config as Obj).rope_type = 'linear';
    (rope.config as Obj).window = 4;
    await expect(convertKerasArtifacts(load().artifacts)).resolves.toBeDefined();
    await expect(convertKerasArtifacts(artifacts)).rejects.toThrow(
      "layer 'rotary_embedding' (RotaryEmbedding) has the option 'window' = 4, which this " +
        'package does not implement',
    );
  });
});
