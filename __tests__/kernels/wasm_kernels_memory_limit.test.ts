/**
 * The package where WebAssembly memory cannot be reserved (`ulimit -v`): importing it must not
 * take the process down (the SIMD kernels are an optimisation), and the layers give tfjs' results.
 * Runs the built package (dist/, built by jest's globalSetup) in a child process.
 */
import {spawnSync} from 'node:child_process';
import * as path from 'node:path';

/** Keras' Attention (no scale): softmax(q vᵀ) v per batch, in plain loops. */
function luong(query: number[][][], value: number[][][]): number[][][] {
  return query.map((qs, b) =>
    qs.map((q) => {
      const logits = value[b].map((v) => v.reduce((s, x, i) => s + x * q[i], 0));
      const top = Math.max(...logits);
      const e = logits.map((l) => Math.exp(l - top));
      const sum = e.reduce((s, x) => s + x, 0);
      return value[b][0].map((_, j) => value[b].reduce((s, v, r) => s + (e[r] / sum) * v[j], 0));
    }),
  );
}

describe('importing the package where WebAssembly memory cannot be reserved', () => {
  it('under ulimit -v 4000000 the process exits 0, kernels off, cpu results equal plain loops', () => {
    const query = [
      [
        [0.5, -1, 2],
        [1.5, 0.25, -0.75],
      ],
    ];
    const value = [
      [
        [1, 2, 3],
        [-1, 0.5, 2],
        [0, -2, 1],
        [0.25, 0.75, -0.5],
      ],
    ];
    const child = path.join(__dirname, '..', 'helpers', 'memory_limit_child.js');
    const r = spawnSync(
      'bash',
      [
        '-c',
        'ulimit -v 4000000 && exec "$0" "$@"',
        process.execPath,
        child,
        JSON.stringify([query, value]),
      ],
      {encoding: 'utf8'},
    );
    // tfjs' "install the node backend" banner aside, nothing on stderr (no unhandled rejection)
    const stderr = r.stderr.replace(
      /\s*=+\s*Hi, looks like you are running TensorFlow\.js[^\n]*\s*=+\s*/,
      '',
    );
    expect({status: r.status, stderr}).toEqual({status: 0, stderr: ''});
    const got = JSON.parse(r.stdout) as {
      memoryLimited: boolean;
      ready: boolean;
      backend: string;
      output: number[][][];
    };
    expect(got.memoryLimited).toBe(true); // the limit does refuse WebAssembly memory here
    expect(got.ready).toBe(false);
    expect(got.backend).toBe('cpu');
    const want = luong(query, value);
    const err = Math.max(...got.output.flat(2).map((x, i) => Math.abs(x - want.flat(2)[i])));
    expect(err).toBeLessThan(1e-6);
    expect(got.output.flat(2)).toHaveLength(6);
  });
});
