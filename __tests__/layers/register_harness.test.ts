/**
 * The layer harness over every class the package registers: each case of
 * `helpers/layer_harness.ts` on every backend, and a check that the cases cover exactly the classes
 * src/layers/register.ts registers (read at run time), each case making a layer of its class.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import '../../src';
import {FAMILY_LAYER_CLASSES} from '../../src/hub_models/register_layers';
import {
  LAYER_CLASSES as GENERIC_LAYER_CLASSES,
  LORA_TFJS_CLASSES,
  MASKED_TFJS_CLASSES,
} from '../../src/layers/register';
import {describeBackends, useBackend} from '../helpers/backends';
import {LAYER_CASES, LayerCase, runLayerTest} from '../helpers/layer_harness';

/** The package's layer classes: the generic ones and the built-in families' own. */
const LAYER_CLASSES = [...GENERIC_LAYER_CLASSES, ...FAMILY_LAYER_CLASSES];
type LayerClass = (typeof LAYER_CLASSES)[number];

/**
 * Registered classes without a case, case keys that are no registered class, and cases whose
 * `make()` gives a layer of another class than their key: all empty when the cases cover the
 * registered classes.
 */
function harnessCoverage(
  registered: readonly LayerClass[],
  cases: Readonly<Record<string, ReadonlyArray<[string, LayerCase]>>>,
): {missing: string[]; unknown: string[]; wrongClass: string[]} {
  const names = registered.map((cls) => cls.className);
  const missing = names.filter((n) => (cases[n]?.length ?? 0) === 0);
  const unknown = Object.keys(cases).filter((n) => !names.includes(n));
  const wrongClass: string[] = [];
  for (const cls of registered) {
    for (const [name, c] of cases[cls.className] ?? []) {
      const layer = c.make();
      // the exact class: CachedMultiHeadAttention is a MultiHeadAttention too
      if (layer.constructor !== cls) {
        wrongClass.push(`${cls.className}: '${name}' makes a ${layer.getClassName()}`);
      }
    }
  }
  return {missing, unknown, wrongClass};
}

describe('layer harness coverage', () => {
  beforeAll(() => useBackend('cpu'));

  it('has a case for every class src/layers/register.ts registers, and for no other', () => {
    // what register.ts registers: LAYER_CLASSES and the tfjs layers it replaces for Keras'
    // masks (MASKED_TFJS_CLASSES) and for LoRA (LORA_TFJS_CLASSES), tested against Keras in
    // their own files, in one loop
    const source = fs.readFileSync(
      path.join(__dirname, '..', '..', 'src', 'layers', 'register.ts'),
      'utf8',
    );
    expect(source.match(/registerClass\(/g)).toEqual(['registerClass(']);
    expect(source).toMatch(
      /for \(const cls of \[\.\.\.LAYER_CLASSES, \.\.\.MASKED_TFJS_CLASSES, \.\.\.LORA_TFJS_CLASSES\]\) \{\s*tf\.serialization\.registerClass\(/,
    );
    const map = tf.serialization.SerializationMap.getMap().classNameMap;
    for (const cls of LAYER_CLASSES) expect(map[cls.className]?.[0]).toBe(cls);
    for (const cls of MASKED_TFJS_CLASSES) expect(map[cls.className]?.[0]).toBe(cls);
    for (const cls of LORA_TFJS_CLASSES) expect(map[cls.className]?.[0]).toBe(cls);
    expect(LAYER_CLASSES.length).toBeGreaterThanOrEqual(15);

    const before = tf.memory().numTensors;
    expect(harnessCoverage(LAYER_CLASSES, LAYER_CASES)).toEqual({
      missing: [],
      unknown: [],
      wrongClass: [],
    });
    expect(tf.memory().numTensors).toBe(before);
  });

  it('reports a registered class without a case, and a case of the wrong class', () => {
    const withoutSine = Object.fromEntries(
      Object.entries(LAYER_CASES).filter(([n]) => n !== 'SinePositionEncoding'),
    );
    expect(harnessCoverage(LAYER_CLASSES, withoutSine).missing).toEqual(['SinePositionEncoding']);
    const swapped = {...LAYER_CASES, Attention: LAYER_CASES.DotProductAttention};
    expect(harnessCoverage(LAYER_CLASSES, swapped).wrongClass).toEqual(
      LAYER_CASES.DotProductAttention.map(
        ([name]) => `Attention: '${name}' makes a DotProductAttention`,
      ),
    );
    expect(harnessCoverage(LAYER_CLASSES, {...LAYER_CASES, Dense: []}).unknown).toEqual(['Dense']);
  });
});

describeBackends('layer harness', () => {
  for (const [className, cases] of Object.entries(LAYER_CASES)) {
    for (const [name, c] of cases) runLayerTest(`${className}: ${name}`, c);
  }
});
