// Child process of io/atomic_save.test.ts: saves a model whose every weight equals `value` to
// `target`, `times` times in a row (so a SIGKILL from the parent lands anywhere in a save), then exits.
const tf = require('@tensorflow/tfjs');
const {fileSystem} = require('../../dist/index.cjs');

async function main() {
  const [target, value, times, units] = process.argv.slice(2);
  await tf.setBackend('cpu');
  const model = tf.sequential({
    layers: [
      tf.layers.dense({
        inputShape: [Number(units)],
        units: Number(units),
        kernelInitializer: tf.initializers.constant({value: Number(value)}),
        biasInitializer: tf.initializers.constant({value: Number(value)}),
      }),
    ],
  });
  process.stdout.write('ready\n');
  for (let i = 0; i < Number(times); i++) await model.save(fileSystem(target));
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(String(e && e.stack));
    process.exit(1);
  },
);
