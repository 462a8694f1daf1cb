/**
 * Hostile and broken Keras files: what loadKerasModel refuses, with what message, before
 * allocating what the file declares; and that it reads only the files it names.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import {unzipSync, zipSync, Zippable} from 'fflate';

import {loadKerasModel} from '../../src';
import {CONFIG_JSON_LIMITS} from '../../src/io/bounded_json';
import {loadBounded} from '../helpers/bounded_load';
import {deflatePrefixThenZeros, RawEntry, zipOf} from '../helpers/deflated_zeros';

const dir = path.join(__dirname, '..', '..', 'fixtures', 'keras_files');
const read = (name: string) => new Uint8Array(fs.readFileSync(path.join(dir, name)));
const text = (s: string) => new TextEncoder().encode(s);

/** The entries of a fixture archive, to rebuild variants of it. */
const entriesOf = (name: string) => unzipSync(read(name));

/** Little-endian u64 bytes. */
function u64(n: number): number[] {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n), true);
  return Array.from(b);
}

/** Replaces every occurrence of `from` by `to` (same length) in a copy of `bytes`. */
function patch(
  bytes: Uint8Array,
  from: number[],
  to: number[],
): {bytes: Uint8Array; count: number} {
  const out = bytes.slice();
  let count = 0;
  for (let i = 0; i + from.length <= out.length; i++) {
    if (from.every((b, j) => out[i + j] === b)) {
      out.set(to, i);
      count++;
    }
  }
  return {bytes: out, count};
}

describe('loadKerasModel refuses broken and hostile Keras files', () => {
  it('bytes that are neither a zip archive nor HDF5: says what was expected and what arrived', async () => {
    await expect(loadKerasModel(text('<html>not found</html>'))).rejects.toThrow(
      'loadKerasModel: expected the bytes given to be a .keras file (a zip archive, starting ' +
        'with "PK") or a tf-keras 2 .h5 model (HDF5, starting with 89 48 44 46), received 22 ' +
        'bytes starting with "<html>no"',
    );
    await expect(loadKerasModel(new Uint8Array(0))).rejects.toThrow(/received 0 bytes$/);
  });

  it('a truncated .keras file', async () => {
    const whole = read('functional.keras');
    await expect(loadKerasModel(whole.subarray(0, whole.length >> 1))).rejects.toThrow(
      `reading a .keras file: expected a .keras file (a zip archive), received ${whole.length >> 1} ` +
        'bytes that start as one but have no end record (the file is truncated)',
    );
  });

  it('a .keras file whose central directory points past its end', async () => {
    const whole = read('functional.keras');
    // drop bytes from the middle: the end record survives, its offsets no longer fit
    const cut = new Uint8Array([...whole.subarray(0, 1000), ...whole.subarray(whole.length - 300)]);
    await expect(loadKerasModel(cut)).rejects.toThrow(
      /lies beyond the \d+ bytes received \(the file is truncated\)/,
    );
  });

  it('a truncated .h5 model', async () => {
    const whole = read('k2_mha_dense.h5');
    for (const n of [12000, 100]) {
      await expect(loadKerasModel(whole.subarray(0, n))).rejects.toThrow(
        `reading the bytes given: expected the ${whole.length} bytes its HDF5 superblock ` +
          `declares (end-of-file address), received ${n} (the file is truncated)`,
      );
    }
  });

  for (const bad of ['../config.json', '/etc/passwd', 'assets\\..\\x', 'C:/x', 'assets/../../x']) {
    it(`an entry named ${JSON.stringify(bad)}`, async () => {
      const entries: Zippable = {...entriesOf('functional.keras'), [bad]: text('x')};
      await expect(loadKerasModel(zipSync(entries, {level: 0}))).rejects.toThrow(
        `refusing the zip entry ${JSON.stringify(bad)}: expected a relative name inside the archive`,
      );
    });
  }

  it('a tiny file declaring a 40 GB dataset: refused from its header, nothing allocated', async () => {
    // sequential: Dense(16) on 6 inputs, kernel [6, 16] float32; its dataspace says [200000, 50000]
    const {bytes, count} = patch(
      read('sequential.keras'),
      [...u64(6), ...u64(16)],
      [...u64(200000), ...u64(50000)],
    );
    expect(count).toBeGreaterThanOrEqual(1);
    expect(bytes.length).toBeLessThan(40_000);
    const before = process.memoryUsage().arrayBuffers;
    await expect(loadKerasModel(bytes)).rejects.toThrow(
      /reading the bytes given\/model\.weights\.h5: dataset 'layers\/dense\/vars\/0' declares 40000000000 bytes \(\[200000,50000\] <f4\) at byte \d+, but the file holds \d+ bytes/,
    );
    // the work done, not the time taken: no buffer near the declared size was made
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * 2 ** 20);
  });

  it('a config implying more weights than the weights file declares', async () => {
    const entries = entriesOf('sequential.keras');
    const config = JSON.parse(new TextDecoder().decode(entries['config.json']));
    const dense = config.config.layers.find((l: {class_name: string}) => l.class_name === 'Dense');
    dense.config.units = 1e9;
    entries['config.json'] = text(JSON.stringify(config));
    const before = process.memoryUsage().arrayBuffers;
    const progress: number[] = [];
    const onProgress = (f: number) => progress.push(f);
    await expect(loadKerasModel(zipSync(entries, {level: 0}), {onProgress})).rejects.toThrow(
      /layer 'dense' \(Dense\) implies at least 7000000000 weight values \(units = 1000000000, input width 6\), but the weights manifest declares \d+ in all/,
    );
    expect(progress).toEqual([]); // refused before a weight was copied
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * 2 ** 20);
  });

  it('a deflated entry that inflates to other than it declares', async () => {
    const whole = zipSync(entriesOf('sequential.keras'), {level: 6});
    // the central directory record of config.json: its uncompressed size (offset 24) grows by 1
    const view = new DataView(whole.buffer, whole.byteOffset, whole.byteLength);
    let patched = 0;
    for (let at = 0; at + 46 < whole.length; at++) {
      if (view.getUint32(at, true) !== 0x02014b50) continue;
      const n = view.getUint16(at + 28, true);
      if (new TextDecoder().decode(whole.subarray(at + 46, at + 46 + n)) === 'config.json') {
        view.setUint32(at + 24, view.getUint32(at + 24, true) + 1, true);
        patched++;
      }
    }
    expect(patched).toBe(1);
    await expect(loadKerasModel(whole)).rejects.toThrow(
      /the entry "config.json" declares \d+ bytes but inflates to \d+/,
    );
  });

  it('an HDF5 file of weights only, handed over as a model', async () => {
    const weights = entriesOf('functional.keras')['model.weights.h5'];
    await expect(loadKerasModel(weights)).rejects.toThrow(
      /expected the bytes given to be a full tf-keras 2 model \(a model_config attribute and a model_weights group\), received an HDF5 file with attributes \[\]/,
    );
  });

  it('an archive with npz weights names what it holds', async () => {
    const {['model.weights.h5']: h5, ...rest} = entriesOf('functional.keras');
    expect(h5.length).toBeGreaterThan(0);
    await expect(
      loadKerasModel(zipSync({...rest, 'model.weights.npz': text('npz')}, {level: 0})),
    ).rejects.toThrow(
      'expected the bytes given to hold model.weights.h5 or model.weights.json (it holds model.weights.npz, which is not read)',
    );
  });
});

describe('loadKerasModel reads only the files it names', () => {
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-file-'));
    for (const f of fs.readdirSync(path.join(dir, 'sharded'))) {
      fs.copyFileSync(path.join(dir, 'sharded', f), path.join(tmp, f));
    }
  });
  afterEach(() => fs.rmSync(tmp, {recursive: true, force: true}));

  const setMap = (edit: (map: {weight_map: Record<string, string[]>}) => void) => {
    const file = path.join(tmp, 'model.weights.json');
    const map = JSON.parse(fs.readFileSync(file, 'utf8'));
    edit(map);
    fs.writeFileSync(file, JSON.stringify(map));
  };

  it('an archive with an unreadable extra entry loads (the entry is never read)', async () => {
    const entries: Zippable = {
      ...entriesOf('functional.keras'),
      'assets/extra.bin': new Uint8Array(64),
    };
    const zip = zipSync(entries, {level: 0});
    const bytes = zip;
    const view = new DataView(bytes.buffer);
    // the last local header belongs to the extra entry (fflate writes entries in order)
    let last = -1;
    for (let at = 0; at + 4 <= bytes.length; at++)
      if (view.getUint32(at, true) === 0x04034b50) last = at;
    view.setUint32(last, 0xdeadbeef, true);
    const model = await loadKerasModel(bytes);
    model.dispose();
  });

  it('a folder with links to /dev/zero and /etc beside the named files loads', async () => {
    fs.symlinkSync('/dev/zero', path.join(tmp, 'model.weights.npz'));
    fs.symlinkSync('/etc', path.join(tmp, 'assets'));
    const model = await loadKerasModel(tmp);
    const before = tf.memory().numTensors;
    model.dispose();
    expect(tf.memory().numTensors).toBeLessThan(before);
  });

  it('a shard named with a folder or ".." is refused', async () => {
    for (const bad of ['../model_00000.weights.h5', 'sub/model_00000.weights.h5', '..']) {
      setMap((m) => (m.weight_map['/layers/dense/vars'] = [bad]));
      await expect(loadKerasModel(tmp)).rejects.toThrow(
        `model.weights.json names the shard ${JSON.stringify(bad)}; expected a file name beside it`,
      );
    }
  });

  it('a shard that links outside the folder is refused', async () => {
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-outside-'));
    try {
      fs.renameSync(path.join(tmp, 'model_00001.weights.h5'), path.join(outside, 'shard.h5'));
      fs.symlinkSync(path.join(outside, 'shard.h5'), path.join(tmp, 'model_00001.weights.h5'));
      await expect(loadKerasModel(tmp)).rejects.toThrow(/outside the model folder/);
    } finally {
      fs.rmSync(outside, {recursive: true, force: true});
    }
  });

  it('a missing shard is named', async () => {
    fs.rmSync(path.join(tmp, 'model_00001.weights.h5'));
    await expect(loadKerasModel(tmp)).rejects.toThrow(
      "model.weights.json names the shard 'model_00001.weights.h5', which is missing",
    );
  });
});

describe("loadKerasModel checks a JSON file's size and depth before parsing it", () => {
  let tmp: string;
  beforeEach(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-json-'))));
  afterEach(() => fs.rmSync(tmp, {recursive: true, force: true}));

  it('a small .keras file whose config.json inflates to 12 MiB of [[[...]]]: refused from its declared size, in a bounded child', () => {
    const nested = '['.repeat(6 * 2 ** 20) + ']'.repeat(6 * 2 ** 20);
    const entries: Zippable = {
      ...entriesOf('sequential.keras'),
      'config.json': [text(nested), {level: 9}],
    };
    const file = path.join(tmp, 'nested.keras');
    fs.writeFileSync(file, zipSync(entries, {level: 0}));
    expect(fs.statSync(file).size).toBeLessThan(200_000);
    const r = loadBounded('loadKerasModel', file);
    expect(r.died).toBeUndefined();
    expect(r.message).toBe(
      `reading a .keras file: the entry "config.json" declares ${nested.length} ` +
        `bytes, more than the ${CONFIG_JSON_LIMITS.maxChars} allowed`,
    );
    // not parsed: JSON.parse of it took more than the child's 384 MiB heap (66 MB took 5.3 GB)
    expect(r.maxRssMiB).toBeLessThan(400);
  });

  it('a config.json nesting 200,000 objects (deflated to a few KB): the depth is named', async () => {
    const deep = '{"a":'.repeat(200_000) + '1' + '}'.repeat(200_000);
    const entries: Zippable = {
      ...entriesOf('sequential.keras'),
      'config.json': [text(deep), {level: 9}],
    };
    const bytes = zipSync(entries, {level: 0});
    expect(bytes.length).toBeLessThan(40_000);
    await expect(loadKerasModel(bytes)).rejects.toThrow(
      `loadKerasModel: the bytes given/config.json nests arrays / objects more than ` +
        `${CONFIG_JSON_LIMITS.maxDepth} deep; expected at most ${CONFIG_JSON_LIMITS.maxDepth} levels.`,
    );
  });

  it('metadata.json and model.weights.json are checked the same way', async () => {
    const deep = '['.repeat(5000) + ']'.repeat(5000);
    const entries: Zippable = {...entriesOf('sequential.keras'), 'metadata.json': text(deep)};
    await expect(loadKerasModel(zipSync(entries, {level: 0}))).rejects.toThrow(
      /the bytes given\/metadata\.json nests arrays \/ objects more than 256 deep/,
    );
    for (const f of fs.readdirSync(path.join(dir, 'sharded'))) {
      fs.copyFileSync(path.join(dir, 'sharded', f), path.join(tmp, f));
    }
    fs.writeFileSync(path.join(tmp, 'model.weights.json'), `{"weight_map": ${deep}}`);
    await expect(loadKerasModel(tmp)).rejects.toThrow(
      /model\.weights\.json nests arrays \/ objects more than 16 deep/,
    );
  });

  it('a tf-keras 2 .h5 model whose model_config attribute nests 5,000 levels', async () => {
    await expect(loadKerasModel(read('../hdf5_hostile/deep_model_config.h5'))).rejects.toThrow(
      "loadKerasModel: the bytes given's model_config attribute nests arrays / objects more " +
        `than ${CONFIG_JSON_LIMITS.maxDepth} deep`,
    );
  });
});

describe('loadKerasModel on HDF5 groups that contain themselves (bounded child: these hung)', () => {
  let tmp: string;
  beforeAll(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-h5-loop-'))));
  afterAll(() => fs.rmSync(tmp, {recursive: true, force: true}));

  for (const [name, link, target] of [
    ['loop', 'layers/loop', 'layers'],
    ['back', 'layers/back', '/'],
  ]) {
    it(`${link}, a hard link to '${target}' (h5py, fixtures/hdf5_hostile.py): named, promptly`, () => {
      const weights = read(`../hdf5_hostile/${name}.weights.h5`);
      const file = path.join(tmp, `${name}.keras`);
      const entries: Zippable = {...entriesOf('sequential.keras'), 'model.weights.h5': weights};
      fs.writeFileSync(file, zipSync(entries, {level: 0}));
      const r = loadBounded('loadKerasModel', file);
      expect(r.died).toBeUndefined();
      expect(r.message).toBe(
        `reading ${file}/model.weights.h5: the group '${link}' is a hard link to '${target}', ` +
          'a group already walked (a group that contains itself); expected each group once, as ' +
          'Keras writes them',
      );
    });
  }
});

describe("loadKerasModel bounds a sharded model's inflated bytes by its manifest", () => {
  let tmp: string;
  beforeAll(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-shards-'))));
  afterAll(() => fs.rmSync(tmp, {recursive: true, force: true}));
  const sharded = (name: string) => read(path.join('sharded', name));
  const SHARDS = ['model_00000.weights.h5', 'model_00001.weights.h5'];
  /** 1 + 258 * COPIES zeros: 300 MiB after each shard's own bytes. */
  const COPIES = Math.ceil((300 * 2 ** 20) / 258);

  /** A .keras file of the sharded fixture, each shard padded with 300 MiB of deflated zeros. */
  function paddedKeras(manifest: object, file: string): void {
    const stored = (name: string, data: Uint8Array): RawEntry => ({
      name,
      method: 0,
      data,
      size: data.length,
    });
    const entries: RawEntry[] = [
      stored('config.json', sharded('config.json')),
      stored('model.weights.json', text(JSON.stringify(manifest))),
      ...SHARDS.map((name): RawEntry => {
        const shard = sharded(name);
        const data = deflatePrefixThenZeros(shard, COPIES);
        return {name, method: 8, data, size: shard.length + 1 + 258 * COPIES};
      }),
    ];
    fs.writeFileSync(file, zipOf(entries));
    expect(fs.statSync(file).size).toBeLessThan(5_000_000); // 600 MiB inflated
  }
  const manifest = () => JSON.parse(new TextDecoder().decode(sharded('model.weights.json')));

  it('shards padded to 300 MiB each: the first refused from its declared size, none inflated', () => {
    const file = path.join(tmp, 'padded.keras');
    paddedKeras(manifest(), file);
    const r = loadBounded('loadKerasModel', file);
    expect(r.died).toBeUndefined();
    // total_size 1332 + 2 shards x 65536 + 5 entries x 16384
    const budget = 1332 + 2 * 65536 + 5 * 16384;
    expect(r.message).toBe(
      `loadKerasModel: the shards of ${file}/model.weights.json may take ${budget} bytes in all ` +
        `(its metadata.total_size, 1332, plus ${budget - 1332} for HDF5's structure: 65536 a ` +
        `shard, 16384 an entry); ${budget} are left for 'model_00000.weights.h5': reading a ` +
        `.keras file: the entry "model_00000.weights.h5" declares ${22848 + 1 + 258 * COPIES} ` +
        `bytes, more than the ${budget} allowed`,
    );
    // the work done: nothing near one 300 MiB shard was allocated (all of them took 600+ MiB)
    expect(r.maxRssMiB).toBeLessThan(200); // 83 MiB measured; with one shard inflated, 382
  });

  it('the same with a total_size that allows them: the first shard is checked before the next is inflated', () => {
    const file = path.join(tmp, 'padded_total.keras');
    paddedKeras({...manifest(), metadata: {total_size: 2 * (1 + 258 * COPIES)}}, file);
    const r = loadBounded('loadKerasModel', file);
    expect(r.died).toBeUndefined();
    expect(r.message).toBe(
      `loadKerasModel: the shard 'model_00000.weights.h5' holds ${22848 + 1 + 258 * COPIES} ` +
        `bytes for datasets of 864; expected at most ${864 + 65536 + 3 * 16384} (its datasets ` +
        `plus ${65536 + 3 * 16384} for HDF5's structure)`,
    );
    // one shard inflated (300 MiB), not both
    expect(r.maxRssMiB).toBeLessThan(300 + 300);
  });

  it('a shard holding a dataset the manifest gives to another shard', async () => {
    const dirCopy = path.join(tmp, 'moved');
    fs.mkdirSync(dirCopy);
    for (const f of fs.readdirSync(path.join(dir, 'sharded'))) {
      fs.copyFileSync(path.join(dir, 'sharded', f), path.join(dirCopy, f));
    }
    const m = manifest();
    m.weight_map['/layers/dense/vars'] = ['model_00000.weights.h5'];
    fs.writeFileSync(path.join(dirCopy, 'model.weights.json'), JSON.stringify(m));
    await expect(loadKerasModel(dirCopy)).rejects.toThrow(
      `loadKerasModel: the shard 'model_00001.weights.h5' holds the dataset ` +
        `'layers/dense/vars/0', but ${dirCopy}/model.weights.json gives it no entry ` +
        `'/layers/dense/vars' (its entries: '/layers/multi_head_attention/value_dense/vars')`,
    );
  });
});
