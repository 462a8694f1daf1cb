/**
 * The layer skeleton in ARCHITECTURE.md compiles and works: the block is extracted, its imports
 * pointed at src/, type-checked by ts-jest, and the layer checked against plain loops.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {expectClose} from '../helpers/close';
import {randTensor} from '../helpers/data';
import {lensAllowed, M3, refDotAttention} from '../helpers/reference_attention';

const root = path.join(__dirname, '..', '..');

function loadExample(): {MyAttention: new (args: {units: number}) => tf.layers.Layer} {
  const doc = fs.readFileSync(path.join(root, 'ARCHITECTURE.md'), 'utf8');
  const block = /```ts\n([\s\S]*?)```/.exec(doc);
  expect(block).not.toBeNull();
  // the skeleton is written as a file of src/layers/attention/: its imports resolved from there
  const dir = path.join(root, '__tests__', '.generated');
  const home = path.join(root, 'src', 'layers', 'attention');
  const code = (block as RegExpExecArray)[1].replace(
    /from '(\.\.?\/[^']+)'/g,
    (_m, spec: string) =>
      `from '${path.relative(dir, path.resolve(home, spec)).split(path.sep).join('/')}'`,
  );
  fs.mkdirSync(dir, {recursive: true});
  const file = path.join(dir, 'my_attention.ts');
  fs.writeFileSync(file, code);
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- generated from the doc
  return require(file);
}

describe('ARCHITECTURE.md layer skeleton', () => {
  it('builds, names its sublayer weights and matches plain loops with valid lengths', () => {
    const {MyAttention} = loadExample();
    const layer = new MyAttention({units: 3});
    const x = randTensor([2, 4, 5], 1);
    const lens = tf.tensor1d([2, 4], 'int32');
    const y = layer.apply(x, {validLens: lens}) as tf.Tensor;
    expect(layer.weights.map((w) => w.originalName)).toEqual([`${layer.name}/proj/kernel`]);
    const w = layer.weights[0].read().arraySync() as number[][];
    const X = x.arraySync() as M3;
    const q = X.map((rows) =>
      rows.map((r) => w[0].map((_, j) => r.reduce((s, v, i) => s + v * w[i][j], 0))),
    );
    const ref = refDotAttention(q, q, X, 1 / Math.sqrt(3), lensAllowed([2, 4]));
    expectClose(y, ref.out, 1e-5, 1e-5);
    tf.dispose([x, lens, y]);
    layer.dispose();
  });
});
