/**
 * keras-hub's BertBackbone / BertTextClassifier built in JavaScript from keras-hub's config and
 * weights by Keras 3 path (buildKerasHubModel), against keras-hub 0.32's own outputs
 * (fixtures/hub_families.py): logits, sequence and pooled outputs within 1e-4 on cpu and wasm,
 * refused options named, no tensor left behind.
 */
import * as tf from '@tensorflow/tfjs';

import {buildKerasHubModel} from '../../src';
import type {JsonObject} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {hubFixture} from '../helpers/hub_families_fixture';

const fx = hubFixture('bert');
const TOL = 1e-4;
const INPUTS = ['token_ids', 'segment_ids', 'padding_mask'];

const inputs = () => INPUTS.map((n) => tf.tensor2d(fx.io.inputs[n], undefined, 'int32'));

describeBackends('BERT from keras-hub', () => {
  it('BertTextClassifier: logits [b, num_classes] equal keras-hub within 1e-4, no tensor left', () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('BertTextClassifier', fx.task.config, fx.taskWeights);
    expect(model.inputLayers.map((l) => l.name)).toEqual(INPUTS);
    const xs = inputs();
    const logits = model.predict(xs) as tf.Tensor;
    expect(logits.shape).toEqual([2, 2]);
    expectClose(logits, fx.io.logits as number[][], TOL, 0);
    tf.dispose([logits, ...xs]);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('BertBackbone: sequence_output and pooled_output equal keras-hub within 1e-4', () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('BertBackbone', fx.backbone, fx.backboneWeights);
    const xs = inputs();
    const [sequence, pooled] = model.predict(xs) as tf.Tensor[];
    expectClose(sequence, fx.io.backbone.sequence_output as number[][][], TOL, 0);
    expectClose(pooled, fx.io.backbone.pooled_output as number[][], TOL, 0);
    tf.dispose([sequence, pooled, ...xs]);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('BERT from keras-hub: checks', () => {
  it('an activation of the classifier it does not implement is refused by name', () => {
    const before = tf.memory().numTensors;
    expect(() =>
      buildKerasHubModel(
        'BertTextClassifier',
        {...fx.task.config, activation: 'gelu'},
        fx.taskWeights,
      ),
    ).toThrow('BertTextClassifier: config activation="gelu" is not implemented');
    expect(tf.memory().numTensors).toBe(before);
  });

  it("the classifier's num_classes and dropout are checked before anything is built; no tensor left", () => {
    const before = tf.memory().numTensors;
    const hidden = fx.backbone.config.hidden_dim as number;
    const task = (edit: JsonObject) => () =>
      buildKerasHubModel('BertTextClassifier', {...fx.task.config, ...edit}, fx.taskWeights);
    expect(task({num_classes: 1e9})).toThrow(
      `BertTextClassifier: config num_classes=1000000000 and hidden_dim=${hidden} imply the ` +
        `classifier's kernel of ${1e9 * hidden} values; expected a config that fits its weights`,
    );
    expect(task({dropout: 2})).toThrow(
      "BertTextClassifier: expected config dropout to be a rate, a number in [0, 1] (as Keras' " +
        'Dropout takes it), received 2',
    );
    const backbone = {...fx.backbone, config: {...fx.backbone.config, dropout: 2}};
    expect(task({backbone})).toThrow(
      'BertBackbone: expected config dropout to be a rate, a number in [0, 1]',
    );
    expect(tf.memory().numTensors).toBe(before);
  });

  it("the classifier head's weights are read from the task's paths", () => {
    const m = new Map(fx.taskWeights);
    m.delete('layers/dense/vars/1');
    expect(() => buildKerasHubModel('BertTextClassifier', fx.task.config, m)).toThrow(
      '1 weight missing: layers/dense/vars/1 (shape [2])',
    );
  });
});
