/** `tfjs-attention-train` / `npm run train`: see USAGE in options.ts. */
import {parseOptions, USAGE, UsageError} from './options';
import type {TF} from './tasks/task';
import {train} from './train';

export async function main(argv: string[]): Promise<number> {
  const name = 'tfjs-attention-train';
  try {
    const options = parseOptions(argv);
    if (options.help) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded after the options are valid
    const tf = require('@tensorflow/tfjs') as TF;
    await train(tf, options, process.stdout);
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
