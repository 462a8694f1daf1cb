/**
 * tfjs-attention: attention layers for TensorFlow.js.
 *
 * Importing the package registers every layer class with `tf.serialization.registerClass`.
 */
import './layers/register';

export * from './public_api';
export {fileSystem} from './io/file_system';
export type {FileSystemHandler, FileSystemOptions} from './io/file_system';
export {loadKerasModel} from './interop/load_keras_model';
export {saveKerasFile} from './interop/save_keras_file';
export type {KerasModelSource, LoadKerasModelOptions} from './interop/load_keras_model';
export {attentionHeatmapPng, heatmapPngSize, writeAttentionHeatmapPng} from './viz/heatmap_png';
export type {HeatmapPngOptions} from './viz/heatmap_png';
