/** Every script in examples/ runs to completion against the built package. */
import {spawnSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
const examples = fs.readdirSync(path.join(root, 'examples')).filter((f) => f.endsWith('.js'));

describe('examples', () => {
  it('has the everyday uses', () => {
    expect(examples.sort()).toEqual([
      'add_layers.js',
      'generate_addition.js',
      'keras_gpt_generate.js',
      'save_and_load.js',
      'text_classifier.js',
      'transformer_encoder.js',
    ]);
  });

  it.each(examples)('%s runs and ends with ok', (file) => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-example-'));
    const r = spawnSync(process.execPath, [path.join('examples', file), out], {
      cwd: root,
      encoding: 'utf8',
    });
    fs.rmSync(out, {recursive: true, force: true});
    expect(r.stderr).not.toMatch(/Error/);
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n').pop()).toBe('ok');
  });
});
