/**
 * A Node IOHandler that saves and loads `model.json` + `weights.bin`, in the layout of
 * tfjs-node's `file://` handler, without needing tfjs-node.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs-core';

const MODEL_JSON = 'model.json';
const WEIGHTS_BIN = 'weights.bin';

function locate(target: string): {dir: string; modelJson: string} {
  if (typeof target !== 'string' || target.length === 0) {
    throw new Error(
      `fileSystem: expected a directory or a model.json path, received ${JSON.stringify(target)}`,
    );
  }
  const p = path.resolve(target.replace(/^file:\/\//, ''));
  if (p.endsWith('.json')) {
    return {dir: path.dirname(p), modelJson: p};
  }
  return {dir: p, modelJson: path.join(p, MODEL_JSON)};
}

/** Resolves a weights path of the manifest, refusing any that leaves the model's folder. */
function weightsPath(dir: string, relative: string): string {
  if (
    typeof relative !== 'string' ||
    relative.length === 0 ||
    path.isAbsolute(relative) ||
    /^[a-z]+:\/\//i.test(relative)
  ) {
    throw new Error(
      `fileSystem: refusing weights path ${JSON.stringify(relative)}: expected a path relative to ${dir}`,
    );
  }
  const full = path.resolve(dir, relative);
  const rel = path.relative(dir, full);
  if (rel.startsWith('..') || path.isAbsolute(rel)) {
    throw new Error(
      `fileSystem: refusing weights path ${JSON.stringify(relative)}: it leaves the model folder ${dir}`,
    );
  }
  return full;
}

function toArrayBuffer(buf: Buffer): ArrayBuffer {
  return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) as ArrayBuffer;
}

/**
 * Saves to / loads from a folder on disk: `model.json` (topology, weights manifest, training
 * config, user metadata) and one `weights.bin`, as tfjs-node's `file://` handler writes them.
 *
 * ```js
 * await model.save(fileSystem('models/reverse'));
 * const loaded = await tf.loadLayersModel(fileSystem('models/reverse'));
 * ```
 *
 * @param target a folder (`model.json` inside it), a path to a `.json` file, or a `file://` URL.
 */
export function fileSystem(target: string): tf.io.IOHandler {
  const {dir, modelJson} = locate(target);
  return {
    async save(artifacts: tf.io.ModelArtifacts): Promise<tf.io.SaveResult> {
      if (artifacts.modelTopology instanceof ArrayBuffer) {
        throw new Error(
          'fileSystem: binary model topologies are not supported; save a LayersModel',
        );
      }
      await fs.promises.mkdir(dir, {recursive: true});
      const weightsManifest: tf.io.WeightsManifestConfig = [
        {paths: [WEIGHTS_BIN], weights: artifacts.weightSpecs ?? []},
      ];
      const json: tf.io.ModelJSON = {
        modelTopology: artifacts.modelTopology as object,
        format: artifacts.format,
        generatedBy: artifacts.generatedBy,
        convertedBy: artifacts.convertedBy,
        weightsManifest,
      };
      if (artifacts.trainingConfig != null) {
        json.trainingConfig = artifacts.trainingConfig;
      }
      if (artifacts.signature != null) {
        json.signature = artifacts.signature;
      }
      if (artifacts.userDefinedMetadata != null) {
        json.userDefinedMetadata = artifacts.userDefinedMetadata;
      }
      const data =
        artifacts.weightData == null
          ? new ArrayBuffer(0)
          : tf.io.concatenateArrayBuffers(artifacts.weightData as ArrayBuffer | ArrayBuffer[]);
      await fs.promises.writeFile(path.join(dir, WEIGHTS_BIN), Buffer.from(data));
      await fs.promises.writeFile(modelJson, JSON.stringify(json));
      return {modelArtifactsInfo: tf.io.getModelArtifactsInfoForJSON(artifacts)};
    },

    async load(): Promise<tf.io.ModelArtifacts> {
      let text: string;
      try {
        text = await fs.promises.readFile(modelJson, 'utf8');
      } catch (e) {
        throw new Error(`fileSystem: cannot read ${modelJson}: ${(e as Error).message}`);
      }
      let json: tf.io.ModelJSON;
      try {
        json = JSON.parse(text) as tf.io.ModelJSON;
      } catch (e) {
        throw new Error(`fileSystem: ${modelJson} is not valid JSON: ${(e as Error).message}`);
      }
      if (json == null || typeof json !== 'object' || json.modelTopology == null) {
        throw new Error(
          `fileSystem: ${modelJson} has no modelTopology; expected a tfjs model.json`,
        );
      }
      return tf.io.getModelArtifactsForJSON(json, async (manifest) => {
        const specs: tf.io.WeightsManifestEntry[] = [];
        const buffers: ArrayBuffer[] = [];
        for (const group of manifest) {
          specs.push(...group.weights);
          for (const p of group.paths) {
            buffers.push(toArrayBuffer(await fs.promises.readFile(weightsPath(dir, p))));
          }
        }
        return [specs, tf.io.concatenateArrayBuffers(buffers)];
      });
    },
  };
}
