/** The built package, used as a user would: plain Node require / import, types, browser bundle. */
import {execFileSync} from 'child_process';
import * as os from 'os';
import * as fs from 'fs';
import * as path from 'path';

const root = path.resolve(__dirname, '..');

function node(args: string[]): string {
  return execFileSync(process.execPath, args, {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

// dist/ is built by jest's globalSetup (__tests__/helpers/global_setup.js).
describe('the built package', () => {
  it('has the files the exports map names', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    const entry = pkg.exports['.'];
    for (const file of [entry.types, entry.import, entry.require, pkg.unpkg]) {
      expect(fs.existsSync(path.join(root, file))).toBe(true);
    }
    expect(pkg.peerDependencies['@tensorflow/tfjs-core']).toBe('^4.22.0');
    expect(pkg.peerDependencies['@tensorflow/tfjs-layers']).toBe('^4.22.0');
    const dts = fs.readFileSync(path.join(root, 'dist/index.d.ts'), 'utf8');
    for (const name of [
      'MultiHeadAttention',
      'DotProductAttention',
      'Attention',
      'AdditiveAttention',
      'EinsumDense',
      'einsum',
      'maskedSoftmax',
      'sequenceMask',
      'fileSystem',
      'layers',
    ]) {
      expect(dts).toMatch(new RegExp(`\\b${name}\\b`));
    }
  });

  it("works from a plain Node script with require('tfjs-attention'), registering the layers", () => {
    const out = node([
      '-e',
      `const tf = require('@tensorflow/tfjs');
       const A = require('tfjs-attention');
       (async () => {
         const x = tf.input({shape: [4, 8]});
         const y = A.layers.multiHeadAttention({numHeads: 2, keyDim: 4, name: 'mha'}).apply(x);
         const model = tf.model({inputs: x, outputs: y});
         let saved;
         await model.save(tf.io.withSaveHandler(async (a) => { saved = a; return {modelArtifactsInfo: {}}; }));
         const loaded = await tf.loadLayersModel(tf.io.fromMemory(saved));
         const z = tf.ones([2, 4, 8]);
         const d = tf.max(tf.abs(tf.sub(model.predict(z), loaded.predict(z)))).dataSync()[0];
         console.log(JSON.stringify({shape: loaded.outputs[0].shape, diff: d, cls: loaded.getLayer('mha').getClassName(), einsum: A.einsum('ij->ji', tf.ones([2, 3])).shape}));
       })();`,
    ]);
    const result = JSON.parse(out.trim().split('\n').pop() as string);
    expect(result).toEqual({
      shape: [null, 4, 8],
      diff: 0,
      cls: 'MultiHeadAttention',
      einsum: [3, 2],
    });
  });

  it('works as an ES module', () => {
    const file = path.join(root, 'dist', 'esm-probe.mjs');
    fs.writeFileSync(
      file,
      `import * as tf from '@tensorflow/tfjs';
       import {MultiHeadAttention, maskedSoftmax} from 'tfjs-attention';
       const y = new MultiHeadAttention({numHeads: 1, keyDim: 2}).apply(tf.ones([1, 3, 4]));
       const w = maskedSoftmax(tf.ones([1, 1, 4]), tf.tensor1d([2], 'int32'));
       console.log(JSON.stringify({shape: y.shape, w: Array.from(w.dataSync())}));`,
    );
    try {
      const out = node([file]);
      expect(JSON.parse(out.trim().split('\n').pop() as string)).toEqual({
        shape: [1, 3, 4],
        w: [0.5, 0.5, 0, 0],
      });
    } finally {
      fs.rmSync(file);
    }
  });

  it('bundles for the browser from the packed tarball (esbuild, no Node-only module)', () => {
    // the tarball, unpacked where an app's node_modules would hold it; tfjs from this checkout
    const app = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-app-'));
    const tgz = execFileSync('npm', ['pack', '--silent', '--pack-destination', app], {
      cwd: root,
      encoding: 'utf8',
    }).trim();
    const pkgDir = path.join(app, 'node_modules', 'tfjs-attention');
    fs.mkdirSync(pkgDir, {recursive: true});
    execFileSync('tar', ['xzf', path.join(app, tgz), '-C', pkgDir, '--strip-components=1']);
    expect(fs.existsSync(path.join(pkgDir, 'dist', 'train'))).toBe(false); // no CLI type files
    expect(fs.existsSync(path.join(pkgDir, 'LICENSE'))).toBe(true);
    fs.symlinkSync(
      path.join(root, 'node_modules', '@tensorflow'),
      path.join(app, 'node_modules', '@tensorflow'),
    );
    fs.writeFileSync(
      path.join(app, 'app.js'),
      `import * as tf from '@tensorflow/tfjs';
       import {MultiHeadAttention, TransformerDecoder} from 'tfjs-attention';
       const x = tf.ones([1, 3, 8]);
       const y = new TransformerDecoder({intermediateDim: 8, numHeads: 2}).apply(
         new MultiHeadAttention({numHeads: 2, keyDim: 4}).apply(x));
       globalThis.result = {shape: y.shape, backend: tf.getBackend()};`,
    );
    const esbuild = path.join(root, 'node_modules', '.bin', 'esbuild');
    execFileSync(
      esbuild,
      [
        'app.js',
        '--bundle',
        '--platform=browser',
        '--format=iife',
        '--outfile=bundle.js',
        '--log-level=error',
      ],
      {cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe']},
    );
    const bundle = fs.readFileSync(path.join(app, 'bundle.js'), 'utf8');
    expect(bundle).not.toMatch(/require\("(fs|zlib|stream|util|path)"\)/);
    // the app's code and the package's layers are in the bundle
    expect(bundle).toContain('TransformerDecoder');
    fs.rmSync(app, {recursive: true, force: true});
  }, 120000);

  it('ships a browser bundle that reads tfjs from the global tf and defines tfAttention', () => {
    const out = node([
      '-e',
      `globalThis.tf = require('@tensorflow/tfjs');
       require('vm').runInThisContext(require('fs').readFileSync('dist/tfjs-attention.min.js', 'utf8'));
       const att = new tfAttention.DotProductAttention();
       const y = att.apply([tf.ones([1, 2, 3]), tf.ones([1, 4, 3])]);
       console.log(JSON.stringify({shape: y.shape, registered: !!tf.serialization.SerializationMap.getMap().classNameMap.MultiHeadAttention, fs: 'fileSystem' in tfAttention}));`,
    ]);
    expect(JSON.parse(out.trim().split('\n').pop() as string)).toEqual({
      shape: [1, 2, 3],
      registered: true,
      fs: false,
    });
  });
});
