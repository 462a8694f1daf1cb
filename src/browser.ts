/**
 * Entry of the browser bundle (`dist/tfjs-attention.min.js`, global `tfAttention`): the shared
 * export list (public_api.ts) and `loadKerasModel` for URLs, bytes and IOHandlers; the Node-only helpers
 * (files on disk, PNG output) are left out. tfjs comes from the page's global `tf`.
 */
import './layers/register';

export * from './public_api';
export {loadKerasModel} from './interop/keras_source';
export type {KerasModelSource, LoadKerasModelOptions} from './interop/keras_source';
export {saveKerasFile} from './interop/keras_file_save';
