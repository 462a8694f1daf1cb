/**
 * STAND-IN, to be deleted when the package registers families itself: what
 * `registerKerasHubFamily(family)` and `loadKerasHubPreset(source)` will do for a family defined
 * outside the package, done with today's exports, so that the toy family's test reads as it will
 * (`registerKerasHubFamily(TOY)`, then `loadKerasHubPreset(folder)`). Today:
 * - the layer classes are registered with tfjs' serialization here;
 * - the family joins the package's list of families (`KERAS_HUB_FAMILIES`, a plain array today);
 * - the package's tokenizer loader knows only its own classes (a `switch` in
 *   src/tokenizers/load.ts), so the preset is read without tokenizer.json and its assets, and
 *   the family's tokenizer class is made from them here (its `fileAssets` under
 *   `assets/<config_file stem>/`, as keras-hub's `load_preset_assets` reads them).
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs-core';

import {KERAS_HUB_FAMILIES, loadKerasHubPreset as loadPackagePreset} from '../../../src';
import type {KerasHubFamily, KerasHubPreset} from '../../../src';
import type {ToyFamilyDeclaration} from './toy_family';

/** Families registered here, by backbone class. */
const registered = new Map<string, ToyFamilyDeclaration>();

/** Adds a family: its layer classes, the family itself, its tokenizer class. */
export function registerKerasHubFamily(family: ToyFamilyDeclaration): void {
  if (registered.has(family.backbone)) return;
  for (const cls of family.layers) tf.serialization.registerClass(cls);
  (KERAS_HUB_FAMILIES as KerasHubFamily[]).push(family);
  registered.set(family.backbone, family);
}

/** Every file of a folder by its path inside it (`/`-separated). */
function filesOf(folder: string, under = ''): Array<[string, Uint8Array]> {
  return fs.readdirSync(path.join(folder, under), {withFileTypes: true}).flatMap((e) => {
    const rel = under === '' ? e.name : `${under}/${e.name}`;
    return e.isDirectory()
      ? filesOf(folder, rel)
      : [[rel, new Uint8Array(fs.readFileSync(path.join(folder, rel)))] as [string, Uint8Array]];
  });
}

/** A `save_to_preset` folder of a family registered here: the package's preset and the family's tokenizer. */
export async function loadKerasHubPreset(folder: string): Promise<KerasHubPreset> {
  const files = new Map(filesOf(folder));
  const config = JSON.parse(new TextDecoder().decode(files.get('config.json'))) as {
    class_name: string;
  };
  const family = registered.get(config.class_name);
  const tokenizerJson = files.get('tokenizer.json');
  if (family == null || tokenizerJson == null) return loadPackagePreset(files);
  const json = JSON.parse(new TextDecoder().decode(tokenizerJson)) as {
    class_name: string;
    config: Record<string, unknown>;
  };
  if (json.class_name !== family.tokenizer.className) {
    throw new Error(
      `loadKerasHubPreset: expected the ${family.name} tokenizer ${family.tokenizer.className}, ` +
        `received ${JSON.stringify(json.class_name)}`,
    );
  }
  const stem = String(json.config.config_file ?? 'tokenizer.json').split('.')[0];
  const assets: Record<string, string> = {};
  for (const name of family.tokenizer.fileAssets) {
    const bytes = files.get(`assets/${stem}/${name}`);
    if (bytes == null) throw new Error(`loadKerasHubPreset: missing asset assets/${stem}/${name}`);
    assets[name] = new TextDecoder('utf-8', {fatal: true}).decode(bytes);
  }
  const tokenizer = family.tokenizer.fromPreset(json.config, assets);
  for (const name of [...files.keys()]) {
    if (name === 'tokenizer.json' || name.startsWith('assets/')) files.delete(name);
  }
  const preset = await loadPackagePreset(files);
  preset.tokenizer = tokenizer;
  return preset;
}
