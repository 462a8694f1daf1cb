/**
 * What a model file cannot make loading do, beyond file_system_load.test.ts: hang on a cycle in its graph
 * (tfjs format, Keras 3, nested models), allocate from config numbers its manifest does not
 * declare (a Dense's input width, a topology-only load, Keras 3's throwaway build), recurse or
 * take quadratic time on nested models, slip an option under `__proto__`, repeat a weight name,
 * or name a layer like a property of every object. Loads that hang or allocate on a broken
 * loader run in a child process, with a time limit and a memory limit.
 */
import {spawnSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {convertKerasArtifacts, fileSystem} from '../../src';
import {renameKeras3Weights} from '../../src/interop/keras3_weights';
import {inlineNestedModels as inlineJson} from '../../src/interop/keras_inline';
import {checkTopology, MAX_NESTING, MAX_UNDECLARED_VALUES} from '../../src/io/topology_guard';

type Obj = Record<string, unknown>;
/** The inliner on a test's object (it takes the loader's JSON type). */
const inlineNestedModels = (config: Obj) => inlineJson(config as never);
const root = path.resolve(__dirname, '..', '..');
const fixtures = path.join(__dirname, '..', 'fixtures', 'keras');

function tmp(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-guard-'));
}
const readJson = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
const writeJson = (dir: string, json: unknown) =>
  fs.writeFileSync(path.join(dir, 'model.json'), JSON.stringify(json));

/** A copy of a converted Keras fixture in a folder of its own. */
function fixtureCopy(name: string): string {
  const dir = tmp();
  for (const f of fs.readdirSync(path.join(fixtures, name))) {
    fs.copyFileSync(path.join(fixtures, name, f), path.join(dir, f));
  }
  return dir;
}

/** input [4] -> Dense 'a' (4 -> 4), called `calls` times -> Dense 'b' (units 2), saved. */
async function savedDenses(calls = 1, width = 4): Promise<string> {
  const dir = tmp();
  const x = tf.input({shape: [width], name: 'x'});
  const a = tf.layers.dense({units: width, name: 'a'});
  let h = x;
  for (let i = 0; i < calls; i++) h = a.apply(h) as tf.SymbolicTensor;
  const y = tf.layers.dense({units: 2, name: 'b'}).apply(h) as tf.SymbolicTensor;
  const model = tf.model({inputs: x, outputs: y});
  await model.save(fileSystem(dir));
  model.dispose();
  return dir;
}

const layersOf = (json: {modelTopology: Obj}): Obj[] => {
  const t = json.modelTopology;
  const m = (t.model_config ?? t) as Obj;
  return (m.config as Obj).layers as Obj[];
};
const layer = (json: {modelTopology: Obj}, name: string) =>
  layersOf(json).find((l) => l.name === name) as Obj;

interface ChildCase {
  /** tfjs: tf.loadLayersModel(fileSystem(dir)); keras: loadKerasModel; topology: topologyOnly. */
  kind: 'tfjs' | 'keras' | 'topology';
  dir: string;
}
interface ChildResult {
  message: string;
  ms: number;
  rssGrowth: number;
  bytesGrowth: number;
}

const CHILD = `
const [root, casesJson] = process.argv.slice(2);
const tf = require(require.resolve('@tensorflow/tfjs', {paths: [root]}));
const pkg = require(root + '/dist/index.cjs');
(async () => {
  await tf.setBackend('cpu');
  const out = [];
  for (const c of JSON.parse(casesJson)) {
    const rss = process.memoryUsage().rss;
    const bytes = tf.memory().numBytes;
    const start = Date.now();
    let message = 'loaded';
    try {
      const handler = pkg.fileSystem(c.dir, {topologyOnly: c.kind === 'topology'});
      const model =
        c.kind === 'keras' ? await pkg.loadKerasModel(handler) : await tf.loadLayersModel(handler);
      model.dispose();
    } catch (e) {
      message = e.message;
    }
    out.push({message, ms: Date.now() - start, rssGrowth: process.memoryUsage().rss - rss,
      bytesGrowth: tf.memory().numBytes - bytes});
  }
  process.stdout.write(JSON.stringify(out));
})();
`;

/**
 * Loads each case in a child process (the built package, dist/) limited to `seconds` and to 4 GB
 * of address space: a loader that hangs or allocates gigabytes fails the test instead of the run.
 */
function loadInChild(cases: ChildCase[], seconds = 60): ChildResult[] {
  const dir = tmp();
  const script = path.join(dir, 'load.js');
  fs.writeFileSync(script, CHILD);
  const r = spawnSync(
    'bash',
    [
      '-c',
      'ulimit -v 4000000 && exec "$0" "$@"',
      process.execPath,
      script,
      root,
      JSON.stringify(cases),
    ],
    {encoding: 'utf8', timeout: seconds * 1000},
  );
  fs.rmSync(dir, {recursive: true});
  if (r.signal != null || r.status !== 0) {
    throw new Error(
      `the loading process ${r.signal != null ? `was killed (${r.signal}) after ${seconds} s` : `exited with ${r.status}`}: ${r.stderr.slice(-2000)}`,
    );
  }
  return JSON.parse(r.stdout) as ChildResult[];
}

/** Points the first tensor reference of `l`'s inbound node `node` at `[ref, index]`. */
function rewire(l: Obj, ref: string, index: number, node = 0): void {
  const n = (l.inbound_nodes as unknown[])[node];
  if (Array.isArray(n)) {
    (n as unknown[][])[0][0] = ref;
    (n as unknown[][])[0][1] = index;
  } else {
    const history = ((((n as Obj).args as Obj[])[0] as Obj).config as Obj)
      .keras_history as unknown[];
    history[0] = ref;
    history[1] = index;
  }
}

describe('a cycle in the graph is refused, never loaded forever', () => {
  beforeAll(() => tf.setBackend('cpu'));

  it('tfjs format: two layers reading each other, a layer reading itself, a cycle through node 1', async () => {
    const dirs: string[] = [];
    let dir = await savedDenses();
    let json = readJson(dir);
    rewire(layer(json, 'a'), 'b', 0);
    writeJson(dir, json);
    expect(() => checkTopology(json.modelTopology, null)).toThrow(
      /the graph of the model has a cycle: '(a|b)' \(inbound node 0\) feeds '(b|a)' \(inbound node 0\) feeds '\1' \(inbound node 0\)/,
    );
    dirs.push(dir);
    dir = await savedDenses();
    json = readJson(dir);
    rewire(layer(json, 'a'), 'a', 0);
    writeJson(dir, json);
    expect(() => checkTopology(json.modelTopology, null)).toThrow(
      /has a cycle: 'a' \(inbound node 0\) feeds 'a' \(inbound node 0\)/,
    );
    dirs.push(dir);
    dir = await savedDenses(2);
    json = readJson(dir);
    // a's first call reads its second, which reads its first
    rewire(layer(json, 'a'), 'a', 1, 0);
    writeJson(dir, json);
    expect(() => checkTopology(json.modelTopology, null)).toThrow(
      /has a cycle: 'a' \(inbound node (0|1)\) feeds 'a' \(inbound node (1|0)\) feeds 'a'/,
    );
    dirs.push(dir);
    const results = loadInChild(dirs.map((d) => ({kind: 'tfjs', dir: d})));
    for (const r of results) {
      // no wall time: the child's limit stops a hang, the message says the cycle was found
      expect(r.message).toMatch(/^loading a model: the graph of the model has a cycle: /);
    }
    dirs.forEach((d) => fs.rmSync(d, {recursive: true}));
  }, 120000);

  it('Keras 3: a nested model fed by its own output or by a later layer, a cycle inside it', () => {
    const dirs: string[] = [];
    const outer = (json: {modelTopology: Obj}) => layer(json, 'functional');
    const cases: Array<[(json: {modelTopology: Obj}) => void, RegExp]> = [
      [
        (j) => rewire(outer(j), 'functional', 0),
        /the graph of the model has a cycle: 'functional'/,
      ],
      [
        (j) => rewire(outer(j), 'dense_2', 0),
        /the graph of the model has a cycle: '(functional|dense_2)'/,
      ],
      [
        (j) => {
          const inner = ((outer(j).config as Obj).layers as Obj[]).find(
            (l) => l.name === 'dense_1',
          );
          rewire(inner as Obj, 'layer_normalization', 0);
        },
        /the graph of the nested model 'functional' has a cycle: /,
      ],
    ];
    for (const [edit, message] of cases) {
      const dir = fixtureCopy('k3_hub_nested_functional');
      const json = readJson(dir);
      edit(json);
      writeJson(dir, json);
      expect(() => checkTopology(json.modelTopology, null)).toThrow(message);
      dirs.push(dir);
    }
    const results = loadInChild(dirs.map((d) => ({kind: 'keras', dir: d})));
    results.forEach((r, i) => {
      expect(r.message).toMatch(cases[i][1]);
    });
    dirs.forEach((d) => fs.rmSync(d, {recursive: true}));
  }, 120000);

  it('checks a graph of 50000 nodes in one pass, without recursion', () => {
    // big enough that a quadratic walk (2.5e9 steps) could not pass the generous limit below,
    // which a linear one (a few seconds on a busy machine) never nears
    const n = 50000;
    const layers: Obj[] = [{class_name: 'InputLayer', name: 'l0', config: {}, inbound_nodes: []}];
    for (let i = 1; i < n; i++) {
      layers.push({
        class_name: 'ReLU',
        name: `l${i}`,
        config: {},
        inbound_nodes: [[[`l${i - 1}`, 0, 0, {}]]],
      });
    }
    const topology = {
      class_name: 'Functional',
      config: {layers, input_layers: [['l0', 0, 0]], output_layers: [[`l${n - 1}`, 0, 0]]},
    };
    const start = Date.now();
    checkTopology(topology, 0);
    expect(Date.now() - start).toBeLessThan(60000);
    (layers[1].inbound_nodes as unknown[][][])[0][0][0] = `l${n - 1}`;
    expect(() => checkTopology(topology, 0)).toThrow(
      /has a cycle: 'l1' \(inbound node 0\) feeds 'l2'/,
    );
  });
});

/** Keras 3's reference to output `index` of node `node` of layer `name`. */
const kerasTensor = (name: string, node = 0, index = 0) => ({
  class_name: '__keras_tensor__',
  config: {shape: [null, 4], dtype: 'float32', keras_history: [name, node, index]},
});
const kerasInput = (name: string) => ({
  class_name: 'InputLayer',
  name,
  config: {name, batch_shape: [null, 4], dtype: 'float32'},
  inbound_nodes: [],
});
const kerasLayer = (cls: string, name: string, reads: string) => ({
  class_name: cls,
  name,
  config: {name, trainable: true, dtype: 'float32'},
  inbound_nodes: [{args: [kerasTensor(reads)], kwargs: {}}],
});
const functional = (name: string, layers: Obj[], input: string, output: string) => ({
  class_name: 'Functional',
  name,
  config: {name, layers, input_layers: [input, 0, 0], output_layers: [output, 0, 0]},
});

/** A Keras 3 model whose one layer is a model nested `depth` deep around a ReLU 'r'. */
function nestedDeep(depth: number): Obj {
  let inner: Obj = kerasLayer('ReLU', 'r', `i${depth}`);
  for (let d = depth; d >= 1; d--) {
    const m = functional(`m${d}`, [kerasInput(`i${d}`), inner], `i${d}`, inner.name as string);
    inner = {...m, inbound_nodes: [{args: [kerasTensor(`i${d - 1}`)], kwargs: {}}]};
  }
  return {
    class_name: 'Functional',
    config: functional('outer', [kerasInput('i0'), inner], 'i0', 'm1').config,
  };
}

describe('nested models: a depth limit and linear inlining', () => {
  it(`refuses nesting deeper than ${MAX_NESTING} models before recursing (2000 deep too)`, async () => {
    expect(() => checkTopology(nestedDeep(MAX_NESTING), null)).not.toThrow();
    expect(() => checkTopology(nestedDeep(MAX_NESTING + 1), null)).toThrow(
      /the nested model 'm65' is nested 65 models deep; at most 64 are supported/,
    );
    const deep = nestedDeep(2000);
    await expect(convertKerasArtifacts({modelTopology: deep, weightSpecs: []})).rejects.toThrow(
      /^loading a model: the nested model 'm65' is nested 65 models deep; at most 64 are supported/,
    );
  });

  it(`inlining refuses nesting deeper than ${MAX_NESTING} itself, and inlines ${MAX_NESTING}`, () => {
    const config = (m: Obj) => m.config as Obj;
    expect(() => inlineNestedModels(config(nestedDeep(MAX_NESTING + 1)))).toThrow(
      /^loadKerasModel: the nested model 'm65' is nested 65 models deep; at most 64 are supported/,
    );
    const ok = config(nestedDeep(MAX_NESTING));
    inlineNestedModels(ok);
    expect((ok.layers as Obj[]).map((l) => l.name)).toEqual(['i0', 'r']);
    expect(JSON.stringify((ok.layers as Obj[])[1].inbound_nodes)).toContain(
      '"keras_history":["i0",0,0]',
    );
    expect(ok.output_layers).toEqual([['r', 0, 0]]);
  });

  it('inlines a chain of 40000 nested models in linear time, each reading the one before', () => {
    // big enough that a quadratic inlining (1.6e9 steps) could not pass the generous limit
    // below, which a linear one never nears on a busy machine
    const n = 40000;
    const layers: Obj[] = [kerasInput('x')];
    for (let k = 0; k < n; k++) {
      const m = functional(
        `m${k}`,
        [kerasInput(`i${k}`), kerasLayer('ReLU', `r${k}`, `i${k}`)],
        `i${k}`,
        `r${k}`,
      );
      layers.push({
        ...m,
        inbound_nodes: [{args: [kerasTensor(k === 0 ? 'x' : `m${k - 1}`)], kwargs: {}}],
      });
    }
    const config: Obj = {layers, input_layers: ['x', 0, 0], output_layers: [`m${n - 1}`, 0, 0]};
    const start = Date.now();
    inlineNestedModels(config);
    const ms = Date.now() - start;
    expect(ms).toBeLessThan(60000);
    const flat = config.layers as Obj[];
    expect(flat.length).toBe(n + 1);
    const reads = (l: Obj) =>
      (
        (((l.inbound_nodes as Obj[])[0].args as Obj[])[0].config as Obj).keras_history as unknown[]
      )[0];
    expect(reads(flat[1])).toBe('x');
    for (const k of [1, 2, 20000, n - 1]) {
      expect(flat[k + 1].name).toBe(`r${k}`);
      expect(reads(flat[k + 1])).toBe(`r${k - 1}`);
    }
    expect(config.output_layers).toEqual([[`r${n - 1}`, 0, 0]]);
  });

  it('follows a model whose output is its input through a chain of such models', () => {
    // m0 passes its input through, m1 reads m0: r1 must read x
    const pass = functional('m0', [kerasInput('i0')], 'i0', 'i0');
    const layers: Obj[] = [
      kerasInput('x'),
      {...pass, inbound_nodes: [{args: [kerasTensor('x')], kwargs: {}}]},
      {
        ...functional('m1', [kerasInput('i1'), kerasLayer('ReLU', 'r1', 'i1')], 'i1', 'r1'),
        inbound_nodes: [{args: [kerasTensor('m0')], kwargs: {}}],
      },
    ];
    const config: Obj = {layers, input_layers: ['x', 0, 0], output_layers: ['m1', 0, 0]};
    inlineNestedModels(config);
    expect(JSON.stringify(config.layers)).toContain('"keras_history":["x",0,0]');
    expect((config.layers as Obj[]).map((l) => l.name)).toEqual(['x', 'r1']);
  });
});

describe('weight sizes a config implies are checked before anything is built', () => {
  beforeAll(() => tf.setBackend('cpu'));

  it("a Dense's input width counts: from its InputLayer, Keras 3's build_config, a topology-only load", async () => {
    const cases: Array<[ChildCase, RegExp]> = [];
    // Keras 3: the input layer 3e7 wide (build_config left at 6), then only build_config
    for (const edit of ['input', 'build'] as const) {
      const dir = fixtureCopy('k3_hub_nested_functional');
      const json = readJson(dir);
      if (edit === 'input')
        (layer(json, 'input_layer_1').config as Obj).batch_shape = [null, 5, 3e7];
      else (layer(json, 'dense_3').build_config as Obj).input_shape = [null, 5, 3e7];
      writeJson(dir, json);
      cases.push([
        {kind: 'keras', dir},
        /layer 'dense_3' \(Dense\) implies at least 240000008 weight values \(units = 8, input width 30000000\), but the weights manifest declares 320 in all/,
      ]);
    }
    // tfjs format, an input 3e7 wide
    let dir = await savedDenses(1, 8);
    let json = readJson(dir);
    (layer(json, 'x').config as Obj).batch_input_shape = [null, 3e7];
    writeJson(dir, json);
    cases.push([
      {kind: 'tfjs', dir},
      /layer 'a' \(Dense\) implies at least 240000008 weight values \(units = 8, input width 30000000\), but the weights manifest declares 90 in all/,
    ]);
    // topology only: one layer over the ceiling, then each layer under it but not all together
    dir = await savedDenses(1, 8);
    json = readJson(dir);
    (layer(json, 'a').config as Obj).units = 3e7;
    delete json.weightsManifest;
    writeJson(dir, json);
    cases.push([
      {kind: 'topology', dir},
      new RegExp(
        `layer 'a' \\(Dense\\) implies at least 270000000 weight values \\(units = 30000000, input width 8\\), ` +
          `but no weights manifest is loaded, and the most allowed then is ${MAX_UNDECLARED_VALUES}`,
      ),
    ]);
    dir = await savedDenses(1, 4);
    json = readJson(dir);
    (layer(json, 'a').config as Obj).units = 1.5e7;
    delete json.weightsManifest;
    writeJson(dir, json);
    cases.push([
      {kind: 'topology', dir},
      /the model's layers imply at least 105000002 weight values in all, but no weights manifest is loaded/,
    ]);
    const results = loadInChild(cases.map(([c]) => c));
    results.forEach((r, i) => {
      // the work done, not the time taken: nothing near the implied weights was allocated
      expect(r.message).toMatch(cases[i][1]);
      expect(r.rssGrowth).toBeLessThan(200 * 2 ** 20);
      expect(r.bytesGrowth).toBe(0);
    });
    cases.forEach(([c]) => fs.rmSync(c.dir, {recursive: true}));
  }, 120000);

  it('a Dense whose input width is unknown counts its units (and its bias only without a kernel width)', () => {
    const topology = (units: number) => ({
      class_name: 'Functional',
      config: {
        layers: [
          {
            class_name: 'InputLayer',
            name: 'x',
            config: {batch_input_shape: [null, 3]},
            inbound_nodes: [],
          },
          {class_name: 'ReLU', name: 'r', config: {}, inbound_nodes: [[['x', 0, 0, {}]]]},
          {class_name: 'Dense', name: 'd', config: {units}, inbound_nodes: [[['r', 0, 0, {}]]]},
        ],
        input_layers: [['x', 0, 0]],
        output_layers: [['d', 0, 0]],
      },
    });
    expect(() => checkTopology(topology(10), 10)).not.toThrow();
    expect(() => checkTopology(topology(11), 10)).toThrow(
      /layer 'd' \(Dense\) implies at least 11 weight values \(units = 11\)/,
    );
  });

  it('renaming Keras 3 weights checks the implied sizes against the weights given before building', async () => {
    const topology = {
      class_name: 'Functional',
      config: {
        name: 'm',
        layers: [
          {
            class_name: 'InputLayer',
            name: 'x',
            config: {name: 'x', batch_input_shape: [null, 1e6], dtype: 'float32'},
            inbound_nodes: [],
          },
          {
            class_name: 'Dense',
            name: 'dense',
            config: {name: 'dense', units: 8},
            inbound_nodes: [[['x', 0, 0, {}]]],
          },
        ],
        input_layers: [['x', 0, 0]],
        output_layers: [['dense', 0, 0]],
      },
    };
    const specs: tf.io.WeightsManifestEntry[] = [
      {name: 'layers/dense/vars/0', shape: [6, 8], dtype: 'float32'},
      {name: 'layers/dense/vars/1', shape: [8], dtype: 'float32'},
    ];
    const before = tf.memory().numBytes;
    await expect(renameKeras3Weights(topology as never, specs)).rejects.toThrow(
      /layer 'dense' \(Dense\) implies at least 8000008 weight values \(units = 8, input width 1000000\), but the weights manifest declares 56 in all/,
    );
    expect(tf.memory().numBytes).toBe(before);
  });

  it('the throwaway Keras 3 build disposes every weight, a tied embedding used twice included', async () => {
    const json = readJson(path.join(fixtures, 'k3_hub_reversible_tied'));
    const artifacts = {
      modelTopology: json.modelTopology,
      weightSpecs: json.weightsManifest.flatMap((g: {weights: unknown[]}) => g.weights),
    };
    await convertKerasArtifacts(artifacts); // tfjs' first use of some ops keeps tensors
    const before = tf.memory().numTensors;
    const converted = await convertKerasArtifacts(artifacts);
    expect(converted.weightSpecs?.map((s) => s.name)).toContain('reversible_embedding/embeddings');
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('names and keys a model file cannot use', () => {
  beforeAll(() => tf.setBackend('cpu'));

  /** The Keras 3 nested fixture with `option` set, as an own key, on the config of `name`. */
  function withOwnKey(fixture: string, name: string, key: string, value: unknown) {
    const json = readJson(path.join(fixtures, fixture));
    const config = (layersOf(json).find((l) => l.name === name) as Obj).config as Obj;
    Object.defineProperty(config, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
    // through text, as a file gives it: JSON.parse makes `__proto__` an own key
    const text = JSON.stringify(json);
    expect(text).toContain('"__proto__":');
    const parsed = JSON.parse(text);
    return {
      modelTopology: parsed.modelTopology,
      weightSpecs: parsed.weightsManifest.flatMap((g: {weights: unknown[]}) => g.weights),
    };
  }

  it("refuses an option under '__proto__' (tfjs' Dense and a class with a contract)", async () => {
    await expect(
      convertKerasArtifacts(
        withOwnKey('k3_hub_nested_functional', 'dense_3', '__proto__', {units: 99}),
      ),
    ).rejects.toThrow(
      /layer 'dense_3' \(Dense\) has an option named '__proto__', which no layer takes/,
    );
    const gqa = JSON.stringify(readJson(path.join(fixtures, 'k3_gqa_block')));
    const name = /"class_name":\s*"GroupQueryAttention"[^]*?"name":\s*"([^"]+)"/.exec(
      gqa,
    )?.[1] as string;
    await expect(
      convertKerasArtifacts(withOwnKey('k3_gqa_block', name, '__proto__', {num_query_heads: 1})),
    ).rejects.toThrow(new RegExp(`layer '${name}' \\(GroupQueryAttention\\) has .*'__proto__'`));
  });

  it('refuses a weight name listed twice in the manifest, naming it', async () => {
    const dir = await savedDenses();
    const json = readJson(dir);
    const weights = json.weightsManifest[0].weights as Array<{name: string}>;
    weights.find((w) => w.name === 'b/kernel')!.name = 'a/kernel';
    writeJson(dir, json);
    await expect(tf.loadLayersModel(fileSystem(dir))).rejects.toThrow(
      /the weights manifest lists the weight 'a\/kernel' more than once/,
    );
    await expect(
      convertKerasArtifacts({modelTopology: json.modelTopology, weightSpecs: weights as never}),
    ).rejects.toThrow(/lists the weight 'a\/kernel' more than once/);
    fs.rmSync(dir, {recursive: true});
  });

  it("refuses layers named 'constructor' or 'hasOwnProperty' with a clear error", async () => {
    for (const bad of ['constructor', 'hasOwnProperty']) {
      const dir = await savedDenses();
      const text = fs.readFileSync(path.join(dir, 'model.json'), 'utf8');
      fs.writeFileSync(path.join(dir, 'model.json'), text.split('"a"').join(`"${bad}"`));
      await expect(tf.loadLayersModel(fileSystem(dir))).rejects.toThrow(
        new RegExp(
          `the model has a layer named '${bad}', a property name of every JavaScript object`,
        ),
      );
      fs.rmSync(dir, {recursive: true});
    }
  });
});
