/** `tfjs-attention-train` / `npm run train`: see USAGE in options.ts. */
import {fromKeras, parseFromKeras} from './from_keras';
import {parseOptions, USAGE, UsageError} from './options';
import type {TF} from './tasks/task';
import {train} from './train';

/** `@tensorflow/tfjs`, or null when it is not installed. */
function loadTfjs(): TF | null {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded after the options are valid
    return require('@tensorflow/tfjs') as TF;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'MODULE_NOT_FOUND' && err.message.includes("'@tensorflow/tfjs'")) return null;
    throw e;
  }
}

export async function main(argv: string[]): Promise<number> {
  const name = 'tfjs-attention-train';
  try {
    const keras = argv.includes('-h') || argv.includes('--help') ? null : parseFromKeras(argv);
    const options = keras === null ? parseOptions(argv) : null;
    if (options?.help) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    const tf = loadTfjs();
    if (tf == null) {
      process.stderr.write(
        `${name}: error: the training script needs @tensorflow/tfjs, which is not installed ` +
          '(this package only declares tfjs-core and tfjs-layers as peer dependencies).\n' +
          'Install it next to tfjs-attention: npm install @tensorflow/tfjs ' +
          '@tensorflow/tfjs-backend-wasm\n',
      );
      return 2;
    }
    if (keras !== null) await fromKeras(tf, keras, process.stdout);
    else if (options !== null) await train(tf, options, process.stdout);
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`${name}: error: ${e.message}\nRun '${name} --help' for the options.\n`);
      return 2;
    }
    process.stderr.write(`${name}: failed: ${(e as Error).message}\n`);
    if (process.env.DEBUG) process.stderr.write(`${(e as Error).stack}\n`);
    return 1;
  }
}

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
