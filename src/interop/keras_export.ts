/**
 * Saving models built with this package so that Keras reads them: `tensorflowjs_converter
 * --input_format tfjs_layers_model --output_format keras` hands the topology to tf-keras'
 * `model_from_json`, which calls `MultiHeadAttention(query, value=..., key=...)` and
 * `Attention([query, value, key])` the Keras way and knows none of this package's extensions.
 *
 * {@link toKerasArtifacts} rewrites the saved topology accordingly: value / key / attention mask
 * become the call kwargs Keras expects, `useCausalMask` / `returnAttentionScores` move from the
 * config into the node, and config keys Keras does not have are dropped. What Keras cannot
 * express (valid lengths, DotProductAttention, the d2l form of AdditiveAttention,
 * TokenAndPositionEmbedding) is refused with an error.
 */
import type * as tf from '@tensorflow/tfjs-core';

import {camelConfig, contractOf} from '../layers/engine/contract';
import type {Json, JsonObject as Obj} from '../layers/engine/contract';

function fail(message: string): never {
  throw new Error(`toKerasArtifacts: ${message}`);
}

function rewrite(layer: Obj): void {
  const cls = layer.class_name as string;
  const name = layer.name as string;
  const config = layer.config as Obj;
  const keras = contractOf(cls)?.keras;
  if (keras == null) return; // tfjs' own layers (and a user's without a contract) as they are
  if ('refused' in keras.keras2) fail(`layer '${name}' is a ${cls}, which ${keras.keras2.refused}`);
  const refusal = keras.refuseConfig?.(camelConfig(config));
  if (refusal != null) fail(`layer '${name}' ${refusal}`);
  if (keras.call.kind !== 'attention') return;
  const byKeyword = keras.call.byKeyword;
  const roles = (config.input_roles as string[] | undefined) ?? null;
  const callKwargs: Obj = {};
  if (config.use_causal_mask === true) callKwargs.use_causal_mask = true;
  if (config.return_attention_scores === true) callKwargs.return_attention_scores = true;
  for (const k of ['use_causal_mask', 'return_attention_scores', 'input_roles']) delete config[k];
  if (config.seed == null) delete config.seed;
  layer.inbound_nodes = ((layer.inbound_nodes as Json[][]) ?? []).map((node) => {
    const entries = node as Json[][];
    const named: Record<string, Json[]> = {};
    entries.forEach((e, i) => {
      // saved configs hold the roles snake_cased: query, value, key, attention_mask, valid_lens
      const role = roles?.[i] ?? ['query', 'value', 'key'][i];
      if (role === undefined)
        fail(
          `layer '${name}' has ${entries.length} inputs; Keras takes a query, a value and a key`,
        );
      if (role === 'valid_lens' || role === 'validLens')
        fail(`layer '${name}' takes valid lengths, which Keras cannot express`);
      named[role] = e;
    });
    const ref = (e: Json[]) => [e[0], e[1], e[2]] as Json;
    const query = named.query;
    const value = named.value ?? query;
    if (byKeyword) {
      const kwargs: Obj = {value: ref(value), ...callKwargs};
      if (named.key) kwargs.key = ref(named.key);
      if (named.attention_mask) kwargs.attention_mask = ref(named.attention_mask);
      return [[query[0], query[1], query[2], kwargs]] as Json;
    }
    if (named.attention_mask)
      fail(`layer '${name}' (${cls}) takes an attention mask, which Keras' ${cls} does not`);
    const list = [query, value, ...(named.key ? [named.key] : [])];
    return list.map((e) => [e[0], e[1], e[2], {...callKwargs}]) as Json;
  });
}

/**
 * Returns a copy of saved artifacts (`model.save(tf.io.withSaveHandler(...))`) whose topology
 * tf-keras loads.
 *
 * ```js
 * await model.save(tf.io.withSaveHandler((a) => fileSystem('for-keras').save(toKerasArtifacts(a))));
 * // then: tensorflowjs_converter --input_format tfjs_layers_model --output_format keras for-keras/model.json model.h5
 * ```
 */
export function toKerasArtifacts(artifacts: tf.io.ModelArtifacts): tf.io.ModelArtifacts {
  const raw = artifacts.modelTopology;
  if (raw == null || raw instanceof ArrayBuffer) fail('expected a JSON model topology');
  const topology = JSON.parse(JSON.stringify(raw)) as Obj;
  const modelConfig = ((topology.model_config as Obj | undefined) ?? topology) as Obj;
  const layers =
    ((modelConfig.config as Obj)?.layers as Obj[] | undefined) ??
    fail('the topology has no layers');
  for (const layer of layers) rewrite(layer);
  return {...artifacts, modelTopology: topology};
}
