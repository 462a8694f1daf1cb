/**
 * gatherRows (src/ops/gather_rows.ts): `table[ids]` and its gradient w.r.t. the table, on every
 * backend (wasm has no `UnsortedSegmentSum`, tfjs' gather gradient): against plain loops, ids
 * repeated (their rows' gradients add up) and ids never looked up (a zero gradient). Exact: each
 * gradient value is a float32 sum of at most three values, in the ids' order either way.
 */
import * as tf from '@tensorflow/tfjs';

import {gatherRows} from '../../src/ops/gather_rows';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {lcg} from '../helpers/data';

describeBackends('gatherRows', () => {
  const [rows, width] = [6, 3];
  const ids = [
    [4, 1, 4],
    [0, 4, 1],
  ];

  it("gives the rows and the table's gradient (repeated ids added), no tensor left behind", () => {
    const tableValues = Array.from(lcg(rows * width, 11));
    const dyValues = Array.from(lcg(ids.flat().length * width, 12));
    const table = tf.variable(tf.tensor2d(tableValues, [rows, width]));
    const idsT = tf.tensor2d(ids, [2, 3], 'int32');
    const dy = tf.tensor2d(dyValues, [6, width]);
    const before = tf.memory().numTensors;
    const {value, grads} = tf.variableGrads(
      () => tf.sum(tf.mul(gatherRows(table, idsT), dy)) as tf.Scalar,
      [table],
    );
    const expected = new Array<number>(rows * width).fill(0);
    ids.flat().forEach((id, n) => {
      // float32 sums, in the ids' order
      for (let j = 0; j < width; j++) {
        expected[id * width + j] = Math.fround(expected[id * width + j] + dyValues[n * width + j]);
      }
    });
    expectClose(grads[table.name], expected, 0, 0);
    // rows 2, 3 and 5 are never looked up: a zero gradient; row 4 three times
    expect(expected.slice(2 * width, 4 * width).every((v) => v === 0)).toBe(true);
    const out = tf.tidy(() => gatherRows(table, idsT));
    expect(out.shape).toEqual([6, width]);
    expectClose(
      out,
      ids.flat().flatMap((id) => tableValues.slice(id * width, (id + 1) * width)),
      0,
      0,
    );
    tf.dispose([value, out, ...Object.values(grads)]);
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([table, idsT, dy]);
  });
});
