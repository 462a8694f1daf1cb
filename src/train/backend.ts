/** Picks the tfjs backend: tfjs-node's `tensorflow` when it loads, else wasm, else cpu. */
import {UsageError} from './options';
import type {TF} from './tasks/task';

function load(name: string): string | null {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional, detected at run time
    require(name);
    return null;
  } catch (e) {
    return (e as Error).message.split('\n')[0];
  }
}

export async function selectBackend(tf: TF, requested: string | null): Promise<string> {
  let name = requested;
  if (requested === 'tensorflow') {
    const err = load('@tensorflow/tfjs-node');
    if (err != null) {
      throw new UsageError(
        `--backend tensorflow needs @tensorflow/tfjs-node, which did not load (${err})`,
      );
    }
  } else if (requested === 'wasm') {
    const err = load('@tensorflow/tfjs-backend-wasm');
    if (err != null) {
      throw new UsageError(
        `--backend wasm needs @tensorflow/tfjs-backend-wasm, which did not load (${err})`,
      );
    }
  } else if (requested == null) {
    name =
      load('@tensorflow/tfjs-node') == null
        ? 'tensorflow'
        : load('@tensorflow/tfjs-backend-wasm') == null
          ? 'wasm'
          : 'cpu';
  }
  if (!(await tf.setBackend(name as string))) {
    throw new UsageError(`backend '${name}' failed to initialise`);
  }
  await tf.ready();
  return name as string;
}
