/**
 * What the Keras loader does for keras-hub graphs beyond the converted fixtures: GetItem against
 * Python's indexing rules (plain loops), keras-hub's tanh GELU, keyword calls it refuses, nested
 * models (inlined; a model called twice is refused), start_index recorded in the config, and the
 * topology guard's count of a nested model's nodes.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {convertKerasArtifacts, GetItem, IndexItem, TransformerDecoder} from '../../src';
import {checkTopology} from '../../src/io/topology_guard';
import {expectClose} from '../helpers/close';
import {randTensor} from '../helpers/data';

const dir = path.join(__dirname, '..', 'fixtures', 'keras');
type Obj = Record<string, unknown>;

function artifacts(name: string): {modelTopology: Obj; weightSpecs: tf.io.WeightsManifestEntry[]} {
  const json = JSON.parse(fs.readFileSync(path.join(dir, name, 'model.json'), 'utf8'));
  return {
    modelTopology: json.modelTopology,
    weightSpecs: json.weightsManifest.flatMap((g: {weights: unknown[]}) => g.weights),
  };
}

function layersOf(a: {modelTopology: Obj}): Obj[] {
  return ((a.modelTopology.model_config as Obj).config as Obj).layers as Obj[];
}

/** Python's `range(start, stop, step)` of one slice over `size` (step > 0). */
function pySlice(size: number, start: number | null, stop: number | null, step: number | null) {
  const s = step ?? 1;
  const norm = (v: number | null, d: number) =>
    v == null ? d : Math.min(size, Math.max(0, v < 0 ? v + size : v));
  const out: number[] = [];
  for (let i = norm(start, 0); i < norm(stop, size); i += s) out.push(i);
  return out;
}

describe('GetItem (Keras 3 slicing)', () => {
  const all: IndexItem = {start: null, stop: null, step: null};
  const cases: Array<[string, IndexItem[]]> = [
    ['x[:, 0]', [all, 0]],
    ['x[:, -1]', [all, -1]],
    ['x[:, 1:3]', [all, {start: 1, stop: 3, step: null}]],
    [
      'x[:, -3:, ::2]',
      [all, {start: -3, stop: null, step: null}, {start: null, stop: null, step: 2}],
    ],
    ['x[1, :, 3:99]', [1, all, {start: 3, stop: 99, step: null}]],
  ];
  for (const [what, index] of cases) {
    it(`${what} = Python's indexing (plain loops)`, () => {
      tf.tidy(() => {
        const x = randTensor([2, 4, 5], 7);
        const data = x.arraySync() as number[][][];
        const layer = new GetItem({index});
        const axes = [2, 4, 5].map((size, a) => {
          const it = index[a] ?? all;
          return typeof it === 'number'
            ? [it < 0 ? it + size : it]
            : pySlice(size, it.start, it.stop, it.step);
        });
        const keep = [0, 1, 2].filter((a) => typeof (index[a] ?? all) !== 'number');
        const expected: number[] = [];
        for (const i of axes[0])
          for (const j of axes[1]) for (const k of axes[2]) expected.push(data[i][j][k]);
        const shape = keep.map((a) => axes[a].length);
        const y = layer.apply(x) as tf.Tensor;
        expect(y.shape).toEqual(shape);
        expectClose(y, tf.tensor(expected, shape), 0, 0);
        // computeOutputShape with an unknown batch agrees
        expect(layer.computeOutputShape([null, 4, 5])).toEqual(
          keep.map((a) => (a === 0 ? null : axes[a].length)),
        );
      });
    });
  }

  it('refuses an index out of range, a step <= 0 and other items', () => {
    expect(() => new GetItem({index: [{start: null, stop: null, step: 0}]})).toThrow(
      /slice steps must be > 0, received 0/,
    );
    expect(() => new GetItem({index: ['a' as never]})).toThrow(
      /expected index item 0 to be an integer or \{start, stop, step\}, received "a"/,
    );
    const x = tf.zeros([2, 3]);
    expect(() => new GetItem({index: [0, 5]}).apply(x)).toThrow(
      /index 5 is out of range for axis 1 of size 3/,
    );
    x.dispose();
  });
});

describe('keras-hub activations and options', () => {
  it("'geluApproximate' (keras-hub's tanh GELU) = its formula in float64", () => {
    tf.tidy(() => {
      const x = [-3, -1.5, -0.2, 0, 0.7, 2.5];
      const want = x.map(
        (v) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3))),
      );
      const dense = tf.layers.dense({
        units: 1,
        activation: 'geluApproximate' as 'relu',
        useBias: false,
        kernelInitializer: 'ones',
        inputShape: [1],
      });
      const y = dense.apply(tf.tensor2d(x, [6, 1])) as tf.Tensor;
      expectClose(y, tf.tensor2d(want, [6, 1]), 1e-6, 1e-6);
      // and it is not the exact (erf) GELU, which differs by ~1e-3 here
      const exact = tf.layers
        .dense({units: 1, activation: 'gelu', useBias: false, kernelInitializer: 'ones'})
        .apply(tf.tensor2d(x, [6, 1])) as tf.Tensor;
      expect(tf.max(tf.abs(tf.sub(exact, y))).dataSync()[0]).toBeGreaterThan(1e-4);
    });
  });

  it("TransformerDecoder takes keras-hub's 'gelu_approximate' spelling", () => {
    expect(
      new TransformerDecoder({intermediateDim: 4, numHeads: 1, activation: 'gelu_approximate'})
        .activation,
    ).toBe('geluApproximate');
  });
});

describe('loading keras-hub graphs: refusals and rewrites', () => {
  it('refuses a tensor keyword a keras-hub layer does not take, naming what it takes', async () => {
    const a = artifacts('k3_hub_decoder_cross');
    const dec = layersOf(a).find((l) => l.class_name === 'TransformerDecoder') as Obj;
    const node = (dec.inbound_nodes as Obj[])[0];
    const kwargs = node.kwargs as Obj;
    kwargs.query_mask = kwargs.encoder_padding_mask;
    await expect(convertKerasArtifacts(a as tf.io.ModelArtifacts)).rejects.toThrow(
      /layer 'transformer_decoder' \(TransformerDecoder\) is called with the tensor argument 'query_mask', which it does not take here; it takes decoder_sequence, encoder_sequence, decoder_padding_mask/,
    );
  });

  it('refuses a cache or returned scores in a converted call', async () => {
    const a = artifacts('k3_hub_encoder_default');
    const enc = layersOf(a).find((l) => l.class_name === 'TransformerEncoder') as Obj;
    ((enc.inbound_nodes as Obj[])[0].kwargs as Obj).return_attention_scores = true;
    await expect(convertKerasArtifacts(a as tf.io.ModelArtifacts)).rejects.toThrow(
      /called with return_attention_scores=true, which this package does not support in a converted model/,
    );
  });

  it("records the decoder's use_causal_mask=False and keyword roles in its config", async () => {
    const a = await convertKerasArtifacts(
      artifacts('k3_hub_decoder_no_causal') as tf.io.ModelArtifacts,
    );
    const dec = layersOf(a as never).find((l) => l.class_name === 'TransformerDecoder') as Obj;
    expect((dec.config as Obj).use_causal_mask).toBe(false);
    const b = await convertKerasArtifacts(
      artifacts('k3_hub_decoder_cross') as tf.io.ModelArtifacts,
    );
    const cross = layersOf(b as never).find((l) => l.class_name === 'TransformerDecoder') as Obj;
    expect((cross.config as Obj).input_roles).toEqual([
      'decoderSequence',
      'encoderSequence',
      'decoderPaddingMask',
      'encoderPaddingMask',
    ]);
  });

  it('inlines nested functional models (the translation model has no nested model left)', async () => {
    const a = await convertKerasArtifacts(artifacts('k3_hub_translation') as tf.io.ModelArtifacts);
    const classes = layersOf(a as never).map((l) => l.class_name);
    expect(classes).not.toContain('Functional');
    expect(classes).toEqual(expect.arrayContaining(['TransformerEncoder', 'TransformerDecoder']));
  });

  it('refuses a nested model called twice, and a layer name the outer model also has', async () => {
    const a = artifacts('k3_hub_nested_functional');
    const nested = layersOf(a).find((l) => l.class_name === 'Functional') as Obj;
    const nodes = nested.inbound_nodes as Obj[];
    nodes.push(JSON.parse(JSON.stringify(nodes[0])));
    await expect(convertKerasArtifacts(a as tf.io.ModelArtifacts)).rejects.toThrow(
      /the nested model 'functional' is called 2 times; once is supported/,
    );
    // rename an inner layer (and the references to it) to the outer Dense's name
    const b = artifacts('k3_hub_nested_functional');
    const model = layersOf(b).find((l) => l.class_name === 'Functional') as Obj;
    const inner = (model.config as Obj).layers as Obj[];
    const old = (inner.find((l) => l.class_name === 'Dense') as Obj).name as string;
    model.config = JSON.parse(JSON.stringify(model.config).split(`"${old}"`).join('"dense_3"'));
    await expect(convertKerasArtifacts(b as tf.io.ModelArtifacts)).rejects.toThrow(
      /has a layer 'dense_3' and so does the model around it/,
    );
  });

  it('moves a constant start_index into the config, and refuses two different ones', async () => {
    const a = await convertKerasArtifacts(
      artifacts('k3_hub_rotary_start_index') as tf.io.ModelArtifacts,
    );
    const rope = layersOf(a as never).find((l) => l.class_name === 'RotaryEmbedding') as Obj;
    expect((rope.config as Obj).start_index).toBe(3);
    const b = artifacts('k3_hub_rotary_start_index');
    const pos = layersOf(b).find((l) => l.class_name === 'PositionEmbedding') as Obj;
    const nodes = pos.inbound_nodes as Obj[];
    const second = JSON.parse(JSON.stringify(nodes[0]));
    second.kwargs.start_index = 5;
    nodes.push(second);
    await expect(convertKerasArtifacts(b as tf.io.ModelArtifacts)).rejects.toThrow(
      /layer 'position_embedding' is called with different start_index values/,
    );
  });

  it("counts a nested model's own node: tf-keras 2's node 1 of a nested model is valid, node 2 is not", () => {
    const a = artifacts('k2_nested_functional');
    expect(() => checkTopology(a.modelTopology as never, null)).not.toThrow();
    const layers = ((a.modelTopology.model_config as Obj).config as Obj).layers as Obj[];
    const reader = layers.find((l) =>
      JSON.stringify(l.inbound_nodes ?? []).includes('"inner",1'),
    ) as Obj;
    const text = JSON.stringify(reader.inbound_nodes).replace('"inner",1', '"inner",2');
    reader.inbound_nodes = JSON.parse(text);
    expect(() => checkTopology(a.modelTopology as never, null)).toThrow(
      /reads node 2 of 'inner', which has 2/,
    );
  });
});
