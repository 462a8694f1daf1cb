// Child process of the bounded loading tests (helpers/bounded_load.ts): loads one source with
// the package bundled from src/ (argv[2]) under the time and memory limits the parent set, and
// prints what happened as JSON: the error's message (or the model's weight count) and the peak
// resident memory in MiB.
const fs = require('fs');

const [bundle, fn, source] = process.argv.slice(2);

// Peak resident memory of this process alone, in MiB: Linux's VmHWM (of this program's own address
// space); getrusage's maxRSS also keeps the peak of the process before its exec, that is of the
// forked jest worker, hundreds of MiB after a few suites, whatever this child did.
function peakRssMiB() {
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    if (m) return Math.round(Number(m[1]) / 1024);
  } catch {
    // not Linux: getrusage below
  }
  return Math.round(process.resourceUsage().maxRSS / 1024);
}

async function main() {
  const tf = require('@tensorflow/tfjs');
  await tf.setBackend('cpu');
  const pkg = require(bundle);
  let result;
  try {
    const loaded = await pkg[fn](source);
    const model = loaded.model ?? loaded;
    result = {ok: true, weights: model.getWeights().length};
  } catch (e) {
    result = {ok: false, message: String(e && e.message)};
  }
  result.maxRssMiB = peakRssMiB();
  process.stdout.write(JSON.stringify(result));
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(String(e && e.stack));
    process.exit(1);
  },
);
