/**
 * Keras 3's `_flatten_layers(include_self=False)` order (src/layers/engine/keras_layer_order.ts):
 * on the tiny GPT-2 and Llama 3 presets of fixtures/lora_finetune.py, the layers with weights in
 * keras-hub's order (`weighted_layers`: name, class and path of each); on a hand-made tree of
 * composite layers, the order Keras' deque gives (written out below from its
 * popleft / extendleft rule, so sublayers come last-made first).
 */
import * as tf from '@tensorflow/tfjs';

import {CompositeLayer} from '../../../src/layers/engine/composite_layer';
import {
  kerasFlattenedLayers,
  kerasWeightedLayers,
} from '../../../src/layers/engine/keras_layer_order';
import {useBackend} from '../../helpers/backends';
import {loadLoraCase, loraExpected} from '../../helpers/lora_fixture';

type Shape = (number | null)[];

/** A composite layer of dense sublayers (and a weightless activation) applied in turn. */
class Chain extends CompositeLayer {
  static readonly className = 'TestChain';
  private readonly make: () => tf.layers.Layer[];
  constructor(name: string, make: () => tf.layers.Layer[]) {
    super({name});
    this.make = make;
  }
  override build(inputShape: Shape | Shape[]): void {
    let shape = inputShape as Shape;
    for (const layer of this.make()) {
      this.addSublayer(layer, shape);
      shape = layer.computeOutputShape(shape) as Shape;
    }
    this.built = true;
  }
  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return [...(inputShape as Shape).slice(0, -1), 3];
  }
  override call(inputs: tf.Tensor | tf.Tensor[]): tf.Tensor {
    return tf.tidy(() => {
      let x = Array.isArray(inputs) ? inputs[0] : inputs;
      for (const s of this.sublayers) x = s.apply(x) as tf.Tensor;
      return x;
    });
  }
}

const dense = (name: string) => tf.layers.dense({units: 3, name});

/** block made of a, inner (x, y), b and act (no weights), in that order. */
const block = () =>
  new Chain('block', () => [
    dense('a'),
    new Chain('inner', () => [dense('x'), dense('y')]),
    dense('b'),
    tf.layers.activation({activation: 'relu', name: 'act'}),
  ]);

describe("Keras' layer order", () => {
  beforeAll(() => useBackend('cpu'));

  it("keeps the root's own layers in order and reverses each sublayer's (extendleft)", () => {
    const root = block();
    root.build([null, 4]);
    // Keras: the root's own layers start the deque in order, [a, inner, b, act]; popping inner
    // puts its [x, y] reversed at the front: y, x; then b and act
    expect(kerasFlattenedLayers(root).map((l) => l.name)).toEqual([
      'a',
      'inner',
      'y',
      'x',
      'b',
      'act',
    ]);
    expect(kerasWeightedLayers(root).map((l) => l.name)).toEqual(['a', 'inner', 'y', 'x', 'b']);
    root.weights.forEach((w) => w.dispose());
  });

  it("lists a model's layers in order, each one's sublayers after it, reversed", () => {
    const input = tf.input({shape: [4]});
    const first = block();
    const h = first.apply(input) as tf.SymbolicTensor;
    const out = dense('top').apply(h) as tf.SymbolicTensor;
    const model = tf.model({inputs: input, outputs: out});
    const names = kerasFlattenedLayers(model).map((l) => l.name);
    expect(names.slice(1)).toEqual(['block', 'act', 'b', 'inner', 'y', 'x', 'a', 'top']);
    expect(kerasFlattenedLayers(model)[0].getClassName()).toBe('InputLayer');
    // each layer once, the input layer (no weights) left out of the weighted list
    expect(kerasWeightedLayers(model).map((l) => l.name)).toEqual([
      'block',
      'b',
      'inner',
      'y',
      'x',
      'a',
      'top',
    ]);
    // a plain layer has no sublayers
    expect(kerasFlattenedLayers(dense('alone'))).toEqual([]);
    model.dispose();
  });

  describe.each(['gpt2', 'llama3'] as const)('the %s preset', (c) => {
    it('numbers the layers with weights as keras-hub does: names, classes and paths', async () => {
      const e = loraExpected(c);
      const preset = await loadLoraCase(c);
      const mine = kerasWeightedLayers(preset.model);
      // the package's classes carry keras-hub's and Keras' names (ReversibleEmbedding,
      // TransformerDecoder, LlamaAttention, EinsumDense, tfjs' Dense and LayerNormalization...)
      expect(mine.map((l) => [l.name, l.getClassName()])).toEqual(
        e.weighted_layers.map((l) => [l.name, l.class_name]),
      );
      // the same layer, not only the same name: every weight under keras-hub's path
      mine.forEach((l, i) => {
        const p = e.weighted_layers[i].path;
        expect(l.weights.length).toBeGreaterThan(0);
        for (const w of l.weights) expect(w.originalName.startsWith(`${p}/`)).toBe(true);
      });
      preset.dispose();
    });
  });
});
