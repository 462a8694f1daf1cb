// Save and load a model with our layers: to disk with fileSystem, and in memory.
// Run: npm run build && node examples/save_and_load.js [folder]
const os = require('os');
const path = require('path');
const tf = require('@tensorflow/tfjs');
const {MultiHeadAttention, fileSystem} = require('tfjs-attention');

async function main() {
  const x = tf.input({shape: [4, 8]});
  const y = new MultiHeadAttention({numHeads: 2, keyDim: 4, useCausalMask: true}).apply(x);
  const model = tf.model({inputs: x, outputs: y});
  const input = tf.randomNormal([1, 4, 8]);

  // disk: model.json + weights.bin, as tfjs-node's file:// writes them
  const dir = process.argv[2] || path.join(os.tmpdir(), 'tfjs-attention-example');
  await model.save(fileSystem(dir));
  const fromDisk = await tf.loadLayersModel(fileSystem(dir));

  // memory: any tf.io handler works
  let artifacts;
  await model.save(
    tf.io.withSaveHandler(
      async (a) => (
        (artifacts = a),
        {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}}
      ),
    ),
  );
  const fromMemory = await tf.loadLayersModel(tf.io.fromMemory(artifacts));

  const want = model.predict(input);
  for (const [name, m] of [
    ['disk', fromDisk],
    ['memory', fromMemory],
  ]) {
    const diff = tf.max(tf.abs(tf.sub(m.predict(input), want))).dataSync()[0];
    console.log(`${name}: max difference ${diff}`);
    if (diff > 1e-6) throw new Error(`${name} model predicts differently`);
  }
  console.log(`saved to ${dir}`);
  console.log('ok');
}
main();
