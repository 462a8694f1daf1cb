// Generation with the committed causal language model models/addition: prompts `aaa+bbb=` in,
// greedy answers `ssss` out (token by token, stopping at the end token).
// Run: npm run build && node examples/generate_addition.js
const path = require('path');
const tf = require('@tensorflow/tfjs');
const {fileSystem, generate} = require('tfjs-attention');

async function main() {
  const model = await tf.loadLayersModel(
    fileSystem(path.join(__dirname, '..', 'models', 'addition')),
  );
  // vocabulary '_0123456789+=$': token id i is the i-th character, '_' padding, '$' the end
  const {vocabulary, maxLen, promptLen, padId, endId, digits} = model.getUserDefinedMetadata();
  const encode = (s) => s.split('').map((c) => vocabulary.indexOf(c));
  const decode = (ids) => ids.map((i) => vocabulary[i]).join('');
  const problems = [
    [123, 456],
    [999, 1],
    [505, 495],
    [78, 904],
  ];
  const prompts = problems.map(([a, b]) => [
    ...encode(`${String(a).padStart(digits, '0')}+${String(b).padStart(digits, '0')}=`),
    ...new Array(maxLen - promptLen).fill(padId),
  ]);
  const out = await generate(model, prompts, {maxLength: maxLen, endId, padId});
  let ok = 0;
  out.arraySync().forEach((ids, i) => {
    const [a, b] = problems[i];
    const text = decode(ids.slice(0, ids.indexOf(endId)));
    const answer = Number(text.slice(promptLen));
    if (answer === a + b) ok++;
    console.log(`${text}   (${a} + ${b} = ${a + b}${answer === a + b ? '' : ', wrong'})`);
  });
  // the answers are generated, not looked up: at least 3 of these 4 are right
  if (ok < problems.length - 1) throw new Error(`only ${ok} of ${problems.length} answers right`);
  console.log('ok');
}
main();
