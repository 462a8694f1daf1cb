/** What the training script needs of a synthetic task. */
import type * as tfTypes from '@tensorflow/tfjs';

import type {StepReport} from '../../generate/step_report';
import type {Rng} from '../random';

export type TF = typeof tfTypes;

export interface Batch {
  /** Model inputs, in the order of the model's inputs. */
  inputs: tfTypes.Tensor[];
  /** Sparse targets for the loss. */
  targets: tfTypes.Tensor;
}

export interface Task {
  name: string;
  description: string;
  /** Stored in the model's userDefinedMetadata: the model's contract. */
  metadata: Record<string, string | number>;
  defaultEpochs: number;
  defaultTrainSize: number;
  defaultBatchSize: number;
  learningRate: number;
  /**
   * The learning rate's factor at a point of the run, `progress` in [0, 1) (the share of the
   * training steps done), set before each batch; default a constant learning rate.
   */
  learningRateSchedule?: (progress: number) => number;
  /** The training loss; default `'sparseCategoricalCrossentropy'`. */
  loss?: (tf: TF) => string | ((yTrue: tfTypes.Tensor, yPred: tfTypes.Tensor) => tfTypes.Tensor);
  /** Metrics shown while training; default `['acc']`. */
  metrics?: (
    tf: TF,
  ) => Array<string | ((yTrue: tfTypes.Tensor, yPred: tfTypes.Tensor) => tfTypes.Tensor)>;
  /**
   * Samples drawn from `rng`: for training, or for evaluation (`validation` after each epoch,
   * `fresh` for the reloaded model), which a task may draw from problems it never trains on.
   */
  generate(tf: TF, n: number, rng: Rng, purpose?: SamplePurpose): Batch;
  buildModel(tf: TF): tfTypes.LayersModel;
  /**
   * The task's metric on a batch, e.g. token accuracy at valid positions; a task scored by
   * `generate` hands `onCompile` its step report.
   */
  accuracy(
    tf: TF,
    model: tfTypes.LayersModel,
    batch: Batch,
    onCompile?: (report: StepReport) => void,
  ): number | Promise<number>;
  metricName: string;
  /** Attention weights `[rows, cols, queries, keys]` for one sample, with axis labels. */
  attention(
    tf: TF,
    model: tfTypes.LayersModel,
    batch: Batch,
    index: number,
  ): TaskAttention | Promise<TaskAttention>;
}

export type SamplePurpose = 'train' | 'validation' | 'fresh';

export interface TaskAttention {
  weights: number[][][][];
  xLabels: string[];
  yLabels: string[];
  title: string;
  titles: string[];
}
