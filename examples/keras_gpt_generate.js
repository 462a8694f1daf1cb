// A keras-hub GPT converted from Keras 3 generates text ids in Node, with a key / value cache:
// the keras.io "Text generation with a miniature GPT" architecture (TokenAndPositionEmbedding,
// two TransformerDecoders, Dense), converted by tensorflowjs_converter --input_format
// keras_keras (fixtures/keras_hub_models.py built it; io.json holds Keras' own greedy tokens).
// Run: npm run build && node examples/keras_gpt_generate.js
const fs = require('fs');
require('@tensorflow/tfjs');
const {cachedDecodingRefusal, fileSystem, generate, loadKerasModel} = require('tfjs-attention');

const dir = '__tests__/fixtures/keras/k3_hub_mini_gpt';

async function main() {
  const model = await loadKerasModel(fileSystem(`${dir}/model.json`));
  console.log('cached decoding:', cachedDecodingRefusal(model) ?? 'yes');
  // right-padded prompts, 3, 1 and 5 tokens long; 8 tokens in all per row
  const prompts = [
    [5, 9, 2, 0, 0, 0, 0, 0],
    [7, 0, 0, 0, 0, 0, 0, 0],
    [3, 11, 4, 8, 1, 0, 0, 0],
  ];
  const ids = await generate(model, prompts, {maxLength: 8, promptLengths: [3, 1, 5]});
  const rows = ids.arraySync();
  console.log(rows.map((r) => r.join(' ')).join('\n'));
  const keras = JSON.parse(fs.readFileSync(`${dir}/io.json`, 'utf8')).generate.ids;
  if (JSON.stringify(rows) !== JSON.stringify(keras)) throw new Error('not the tokens of Keras');
  console.log("the tokens of Keras' greedy loop");
  console.log('ok');
}

main();
