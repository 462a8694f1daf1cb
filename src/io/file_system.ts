/**
 * A Node IOHandler that saves and loads `model.json` + `weights.bin` (the layout of tfjs-node's
 * `file://` handler) without tfjs-node: saves are atomic and exclusive (atomic_save.ts), loads
 * read nothing outside the model folder and check sizes and the graph first (safe_read.ts,
 * topology_guard.ts). What loading promises: SECURITY.md.
 */
import * as fs from 'fs';

import * as tf from '@tensorflow/tfjs-core';

import {saveModelFiles} from './atomic_save';
import {CONFIG_JSON_LIMITS, parseBoundedJson} from './bounded_json';
import {locate, notAModelFolder} from './paths';
import {registerModelFolder, FolderWeights} from './model_folder';
import {checkManifest, planWeights, readWeights, streamWeights} from './safe_read';
import {checkTopology} from './topology_guard';
import {declaredElements} from './weight_bytes';

/** Options of {@link fileSystem}. */
export interface FileSystemOptions {
  /**
   * Load the topology without weights (a model.json with no `weightsManifest`); the model then
   * has freshly initialised weights. Default false: a missing manifest is an error.
   */
  topologyOnly?: boolean;
}

/** An IOHandler whose `save` and `load` are always present. */
export interface FileSystemHandler extends tf.io.IOHandler {
  /** Writes the model: `model.json` and its weights file, atomically and without overwriting. */
  save(artifacts: tf.io.ModelArtifacts): Promise<tf.io.SaveResult>;
  /** Reads `model.json` and its weight files from the directory. */
  load(): Promise<tf.io.ModelArtifacts>;
}

/**
 * Saves to / loads from a folder on disk: `model.json` (topology, weights manifest, training
 * config, user metadata) and one `weights.bin`, as tfjs-node's `file://` handler writes them. A
 * `.json` path other than `model.json` keeps its weights in `<name>.weights.bin`.
 *
 * ```js
 * await model.save(fileSystem('models/reverse'));
 * const loaded = await tf.loadLayersModel(fileSystem('models/reverse'));
 * ```
 *
 * @param target a folder (`model.json` inside it), a path to a `.json` file, or a `file://` URL.
 */
export function fileSystem(target: string, options: FileSystemOptions = {}): FileSystemHandler {
  const where = locate(target);
  const {dir, modelJson} = where;
  /** model.json read and checked: its form, the topology guard, the manifest's form. */
  const readModelJson = async (): Promise<{
    json: tf.io.ModelJSON;
    manifest: tf.io.WeightsManifestConfig | null;
    sha: string | null;
  }> => {
    let text: string;
    let size = 0;
    try {
      const st = await fs.promises.stat(modelJson);
      if (!st.isFile()) throw new Error('not a regular file');
      size = st.size;
      // a file over the limit is refused below, before a byte of it is read
      text =
        size > CONFIG_JSON_LIMITS.maxChars ? '' : await fs.promises.readFile(modelJson, 'utf8');
    } catch (e) {
      const why = await notAModelFolder(where);
      if (why !== null) throw new Error(`fileSystem: cannot load ${modelJson}: ${why}`);
      throw new Error(`fileSystem: cannot read ${modelJson}: ${(e as Error).message}`);
    }
    if (size > CONFIG_JSON_LIMITS.maxChars) {
      throw new Error(
        `fileSystem: ${modelJson} holds ${size} bytes; at most ${CONFIG_JSON_LIMITS.maxChars} ` +
          'are read (a model.json of topology and weights manifest is far smaller)',
      );
    }
    const json = parseBoundedJson(text, modelJson, CONFIG_JSON_LIMITS, 'fileSystem') as
      (tf.io.ModelJSON & {weightsSha256?: unknown}) | null;
    if (json == null || typeof json !== 'object' || json.modelTopology == null) {
      throw new Error(`fileSystem: ${modelJson} has no modelTopology; expected a tfjs model.json`);
    }
    if (json.weightsManifest == null) {
      if (!options.topologyOnly) {
        throw new Error(
          `fileSystem: ${modelJson} has no weightsManifest, so the model would load with ` +
            `random weights; pass {topologyOnly: true} to fileSystem if that is what you want`,
        );
      }
      checkTopology(json.modelTopology, null);
      return {json, manifest: null, sha: null};
    }
    const manifest = checkManifest(json.weightsManifest, modelJson);
    checkTopology(json.modelTopology, declaredElements(manifest.flatMap((g) => g.weights)));
    const sha = typeof json.weightsSha256 === 'string' ? json.weightsSha256 : null;
    return {json, manifest, sha};
  };
  const handler: FileSystemHandler = {
    async save(artifacts: tf.io.ModelArtifacts): Promise<tf.io.SaveResult> {
      if (artifacts.modelTopology instanceof ArrayBuffer) {
        throw new Error(
          'fileSystem: binary model topologies are not supported; save a LayersModel',
        );
      }
      const weightsManifest: tf.io.WeightsManifestConfig = [
        {paths: [where.weightsName], weights: artifacts.weightSpecs ?? []},
      ];
      const json: tf.io.ModelJSON & {weightsSha256?: string} = {
        modelTopology: artifacts.modelTopology as object,
        format: artifacts.format,
        generatedBy: artifacts.generatedBy,
        convertedBy: artifacts.convertedBy,
        weightsManifest,
      };
      if (artifacts.trainingConfig != null) json.trainingConfig = artifacts.trainingConfig;
      if (artifacts.signature != null) json.signature = artifacts.signature;
      if (artifacts.userDefinedMetadata != null) {
        json.userDefinedMetadata = artifacts.userDefinedMetadata;
      }
      const data =
        artifacts.weightData == null
          ? new ArrayBuffer(0)
          : tf.io.concatenateArrayBuffers(artifacts.weightData as ArrayBuffer | ArrayBuffer[]);
      await saveModelFiles(where, new Uint8Array(data), (weightsSha256) =>
        JSON.stringify({...json, weightsSha256}),
      );
      return {modelArtifactsInfo: tf.io.getModelArtifactsInfoForJSON(artifacts)};
    },

    async load(): Promise<tf.io.ModelArtifacts> {
      const {json, manifest, sha} = await readModelJson();
      if (manifest == null) {
        return tf.io.getModelArtifactsForJSON(json, async () => [[], new ArrayBuffer(0)]);
      }
      const {specs, data} = await readWeights(dir, manifest, modelJson, sha);
      return tf.io.getModelArtifactsForJSON(json, async () => [specs, data]);
    },
  };
  registerModelFolder(handler, {
    async open(): Promise<FolderWeights> {
      const {json, manifest, sha} = await readModelJson();
      if (manifest == null) return {artifacts: await handler.load(), stream: null};
      const plan = await planWeights(dir, manifest, modelJson);
      const artifacts = await tf.io.getModelArtifactsForJSON(json, async () => [
        plan.specs,
        new ArrayBuffer(0),
      ]);
      delete artifacts.weightData;
      return {
        artifacts,
        stream: (open) => streamWeights(dir, plan, modelJson, sha, open),
      };
    },
  });
  return handler;
}
