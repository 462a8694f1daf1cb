// The README's image: the attention of the committed reverse model (models/reverse) on one input,
// drawn by the package's own attentionHeatmapSvg with a title, axis names and the tokens as
// labels, written to docs/reverse_attention.svg.
//
//   npm run build && node scripts/readme_heatmap.mjs            writes the image
//   node scripts/readme_heatmap.mjs --out other.svg              writes it elsewhere
//
// It runs on tfjs' cpu backend; __tests__/docs/readme_image.test.ts draws it again and compares it with
// the committed one.
import {createRequire} from 'node:module';
import {writeFileSync} from 'node:fs';
import {dirname, join, resolve} from 'node:path';
import {fileURLToPath} from 'node:url';

const require = createRequire(import.meta.url);
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const tf = require('@tensorflow/tfjs');
const {attentionHeatmapSvg, fileSystem} = require(join(root, 'dist', 'index.cjs'));

/** The input drawn: 8 tokens of the model's 10, the rest padding. */
export const TOKENS = [3, 1, 4, 1, 5, 9, 2, 6];

export async function drawReadmeHeatmap() {
  await tf.setBackend('cpu');
  const model = await tf.loadLayersModel(fileSystem(join(root, 'models', 'reverse')));
  const {maxLen, padId} = model.getUserDefinedMetadata();
  const len = TOKENS.length;
  const ids = [...TOKENS, ...new Array(maxLen - len).fill(padId)];
  const {weights, out} = tf.tidy(() => {
    const x = [tf.tensor2d([ids], [1, maxLen], 'int32'), tf.tensor2d([[len]], [1, 1], 'int32')];
    // the second MultiHeadAttention layer, fed its own input: its heads read the input backwards
    const layer = model.getLayer('mha2');
    const hidden = tf.model({inputs: model.inputs, outputs: layer.input[0]}).predict(x);
    const [, scores] = layer.apply([hidden, x[1]], {returnAttentionScores: true});
    const pred = tf.argMax(model.predict(x), -1);
    return {weights: scores.arraySync()[0], out: pred.arraySync()[0].slice(0, len)};
  });
  model.dispose();
  // valid positions only: queries and keys past the length are padding
  const valid = weights.map((head) => head.slice(0, len).map((row) => row.slice(0, len)));
  return attentionHeatmapSvg(valid, {
    xLabels: TOKENS.map(String),
    yLabels: out.map((t, i) => `out ${i} = ${t}`),
    xLabel: 'Keys: input tokens',
    yLabel: 'Queries: output positions',
    title: `The reverse model reads ${TOKENS.join(' ')} backwards: its second attention layer, per head`,
    titles: valid.map((_, h) => `head ${h}`),
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--out');
  const out = i >= 0 ? resolve(process.argv[i + 1]) : join(root, 'docs', 'reverse_attention.svg');
  writeFileSync(out, (await drawReadmeHeatmap()) + '\n');
  console.log(`wrote ${out}`);
}
