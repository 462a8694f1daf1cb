// Writes .keras files with the package's saveKerasFile (dist/index.cjs: `npm run build` first)
// and the package's own predictions, for scale/test_save_keras_file.py, which loads each file in
// Keras 3 and compares. Usage: node scale/save_keras_file.js <out folder>
// <out>/<name>.keras and <out>/<name>.json ({ids, predictions}) for:
//   decoder_lm: TokenAndPositionEmbedding, TransformerDecoder, a causal MultiHeadAttention, Dense
//   int8: Embedding, Dense and EinsumDense after quantize(model, 'int8') (Keras' int8 scheme)
// and one per keras-hub family, as loadKerasHubPreset / loadKerasModel / buildKerasHubModel return
// them from the committed fixtures (__tests__/fixtures/):
//   gpt2, bert, llama3: hub_presets/<name> (GPT2CausalLM, BertTextClassifier, Llama3CausalLM);
//   llama31: hub_families/llama31 (Llama 3.1's rope options), built by buildKerasHubModel;
//   gpt2_int8: int8_files/gpt2_preset (keras-hub's int8 preset: int8 blocks and token embedding);
//   decoder_int8: int8_files/decoder_lm.keras (Keras' own int8 file of keras-hub decoders);
//   functional_int8: int8_files/functional.keras (Keras' own: int8 Embedding, Dense, EinsumDense
//   and MultiHeadAttention);
//   llama3_int8, bert_int8: the Llama 3 and BERT tasks after quantize(model, 'int8');
//   start_index, mha_scores, mha_gate_window, gqa_gate, gqa_window_causal: keras/<k3_ fixture>
//   (Keras 3 files converted by tensorflowjs_converter).
// Each <name>.json holds {inputs, dtypes, predictions (a list when the model has several
// outputs), outputs}.
const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');
const api = require('../dist/index.cjs');

const IDS = [
  [1, 2, 3, 4, 5, 6],
  [7, 8, 9, 1, 2, 3],
];

function seeded(m, seed) {
  m.setWeights(m.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 0.4, 'float32', seed + i)));
  return m;
}

function decoderLm() {
  const ids = tf.input({shape: [null], dtype: 'int32', name: 'ids'});
  let x = new api.TokenAndPositionEmbedding({
    vocabularySize: 20,
    sequenceLength: 8,
    embeddingDim: 8,
    name: 'embed',
  }).apply(ids);
  x = new api.TransformerDecoder({intermediateDim: 16, numHeads: 2, name: 'decoder'}).apply(x);
  x = new api.MultiHeadAttention({numHeads: 2, keyDim: 4, useCausalMask: true, name: 'mha'}).apply(
    x,
  );
  const logits = tf.layers.dense({units: 5, name: 'logits'}).apply(x);
  return seeded(tf.model({inputs: ids, outputs: logits}), 3);
}

function int8Model() {
  const ids = tf.input({shape: [null], dtype: 'int32', name: 'ids'});
  let x = tf.layers.embedding({inputDim: 20, outputDim: 8, name: 'embed'}).apply(ids);
  x = tf.layers.dense({units: 12, activation: 'relu', name: 'dense'}).apply(x);
  x = new api.EinsumDense({
    equation: 'btd,dh->bth',
    outputShape: [null, 6],
    biasAxes: 'h',
    name: 'proj',
  }).apply(x);
  const float = seeded(tf.model({inputs: ids, outputs: x}), 7);
  return api.quantize(float, 'int8');
}

const FIXTURES = path.join(__dirname, '..', '__tests__', 'fixtures');

/** The model's inputs by name: token ids (IDS), a padding mask, segment ids; floats else. */
function hubInputs(model) {
  return model.inputs.map((t, k) => {
    if (t.dtype === 'float32') {
      // a fixed pattern of the input's shape (batch 2, unknown lengths 6)
      const shape = t.shape.map((d, i) => (d == null ? (i === 0 ? 2 : 6) : d));
      const size = shape.reduce((p, d) => p * d, 1);
      const flat = Array.from({length: size}, (_, i) => Math.sin(0.7 * i + k));
      return tf.tensor(flat, shape).arraySync();
    }
    const name = t.name.replace(/_\d+$/, '');
    if (name === 'padding_mask')
      return IDS.map((row, b) => row.map((_, i) => (b === 1 && i >= 4 ? 0 : 1)));
    if (name === 'segment_ids') return IDS.map((row) => row.map((_, i) => (i >= 3 ? 1 : 0)));
    return IDS;
  });
}

/** A fixtures/hub_families.py case built by buildKerasHubModel from its task config and weights. */
function hubFamily(name) {
  const dir = path.join(FIXTURES, 'hub_families', name);
  const json = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
  const bin = fs.readFileSync(path.join(dir, 'weights.bin'));
  const all = new Float32Array(bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.byteLength));
  const weights = new Map();
  for (const w of json('weights.json').weights) {
    const size = w.shape.reduce((p, d) => p * d, 1);
    weights.set(w.path, {shape: w.shape, values: all.subarray(w.offset, w.offset + size)});
  }
  const task = json('task.json');
  return api.buildKerasHubModel(task.class_name, task.config, weights);
}

const keras = (name) => () => api.loadKerasModel(path.join(FIXTURES, 'keras', name, 'model.json'));

const preset = (dir) => async () =>
  (await api.loadKerasHubPreset(path.join(FIXTURES, ...dir.split('/')))).model;

async function main() {
  const out = process.argv[2];
  if (!out) throw new Error('usage: node scale/save_keras_file.js <out folder>');
  fs.mkdirSync(out, {recursive: true});
  await tf.setBackend('cpu');
  for (const [name, make] of [
    ['decoder_lm', decoderLm],
    ['int8', int8Model],
    ['gpt2', preset('hub_presets/gpt2')],
    ['bert', preset('hub_presets/bert')],
    ['llama3', preset('hub_presets/llama3')],
    ['llama31', () => hubFamily('llama31')],
    ['gpt2_int8', preset('int8_files/gpt2_preset')],
    [
      'decoder_int8',
      () => api.loadKerasModel(path.join(FIXTURES, 'int8_files', 'decoder_lm.keras')),
    ],
    ['llama3_int8', async () => api.quantize(await preset('hub_presets/llama3')(), 'int8')],
    ['bert_int8', async () => api.quantize(await preset('hub_presets/bert')(), 'int8')],
    // Keras 3 files whose calls loadKerasModel keeps in the config: a constant start_index of
    // RotaryEmbedding / PositionEmbedding, and returned scores (Keras' zero fully masked rows)
    ['start_index', keras('k3_hub_rotary_start_index')],
    ['mha_scores', keras('k3_mha_scores_key')],
    // Keras 3.15's gated attention and sliding window (MultiHeadAttention, GroupQueryAttention)
    ['mha_gate_window', keras('k3_mha_gate_window')],
    ['gqa_gate', keras('k3_gqa_gate')],
    ['gqa_window_causal', keras('k3_gqa_window_causal')],
    [
      'functional_int8',
      () => api.loadKerasModel(path.join(FIXTURES, 'int8_files', 'functional.keras')),
    ],
  ]) {
    const model = await make();
    await api.saveKerasFile(model, path.join(out, `${name}.keras`));
    const inputs = hubInputs(model);
    const xs = inputs.map((a, i) => tf.tensor(a, undefined, model.inputs[i].dtype));
    const y = model.predict(xs.length === 1 ? xs[0] : xs);
    const predictions = Array.isArray(y) ? y.map((t) => t.arraySync()) : y.arraySync();
    const dtypes = model.inputs.map((t) => t.dtype);
    fs.writeFileSync(
      path.join(out, `${name}.json`),
      JSON.stringify({inputs, dtypes, predictions, outputs: Array.isArray(y) ? y.length : 1}),
    );
    tf.dispose([xs, y]);
    model.dispose();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
