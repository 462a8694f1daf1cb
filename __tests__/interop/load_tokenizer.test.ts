/**
 * loadTokenizer (src/interop/load_tokenizer.ts) reads a preset's tokenizer through the preset's
 * sources (keras_hub_sources.ts), as loadKerasHubPreset reads its weights: tokenizer.json, then
 * only the assets its class declares (`fileAssets`), each name held to the same rules as a
 * preset's other files (over http: the same origin, a path under the base URL; on disk: a plain
 * path inside the folder), refused before anything is fetched or opened.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import {GPT2, GPT2Tokenizer, loadTokenizer, registerKerasHubFamily} from '../../src';

const GPT2_FILES = path.join(__dirname, '..', '..', 'fixtures', 'tokenizers', 'gpt2');
const OUTSIDE = '../../../secret.txt';

/** GPT-2's tokenizer under a class that declares one asset more, a name leading out of the preset. */
class OutsideTokenizer extends GPT2Tokenizer {
  static override get className(): string {
    return 'OutsideTokenizer';
  }
  static override get fileAssets(): readonly string[] {
    return ['vocabulary.json', 'merges.txt', OUTSIDE];
  }
}

/** The gpt2 tokenizer preset's file `rel`, tokenizer.json naming OutsideTokenizer. */
function presetFile(rel: string): Uint8Array | null {
  const file = path.join(GPT2_FILES, rel);
  if (!fs.existsSync(file)) return null;
  if (rel !== 'tokenizer.json') return new Uint8Array(fs.readFileSync(file));
  const json = JSON.parse(fs.readFileSync(file, 'utf8')) as {class_name: string};
  json.class_name = 'OutsideTokenizer';
  return new TextEncoder().encode(JSON.stringify(json));
}

describe("a tokenizer class's declared assets are read under the preset's own rules", () => {
  beforeAll(() => {
    registerKerasHubFamily({
      ...GPT2,
      name: 'GPT-2 with an asset outside',
      backbone: 'OutsideBackbone',
      tasks: {},
      layers: [],
      tokenizer: OutsideTokenizer,
    });
  });

  it('over http: an asset resolving outside the base URL is refused before it is fetched', async () => {
    const base = 'https://example.test/presets/toy/';
    const asked: string[] = [];
    const fetch = async (url: string): Promise<Response> => {
      asked.push(url);
      const bytes = url.startsWith(base) ? presetFile(url.slice(base.length)) : null;
      return new Response((bytes ?? new TextEncoder().encode('SECRET')) as BodyInit);
    };
    const err = await loadTokenizer(base, {fetch}).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe(
      `loadTokenizer: refusing the file name "assets/tokenizer/${OUTSIDE}": it resolves to ` +
        'https://example.test/presets/secret.txt, outside the preset; expected a path inside ' +
        `the preset at ${base}.`,
    );
    // tokenizer.json, then the declared assets in order, each once; nothing outside the base
    expect(asked).toEqual([
      `${base}tokenizer.json`,
      `${base}assets/tokenizer/vocabulary.json`,
      `${base}assets/tokenizer/merges.txt`,
    ]);
  });

  it('on disk: an asset naming a path out of the folder is refused before it is opened', async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'tok-outside-'));
    const dir = path.join(parent, 'a', 'toy');
    try {
      for (const rel of [
        'tokenizer.json',
        'assets/tokenizer/vocabulary.json',
        'assets/tokenizer/merges.txt',
      ]) {
        fs.mkdirSync(path.dirname(path.join(dir, rel)), {recursive: true});
        fs.writeFileSync(path.join(dir, rel), presetFile(rel) as Uint8Array);
      }
      // the name leads to parent/a/secret.txt, which exists: refused by name, not by absence
      fs.writeFileSync(path.join(parent, 'a', 'secret.txt'), 'SECRET');
      await expect(loadTokenizer(dir)).rejects.toThrow(
        `loadTokenizer: refusing the file name "assets/tokenizer/${OUTSIDE}": expected a path ` +
          `inside ${dir}.`,
      );
    } finally {
      fs.rmSync(parent, {recursive: true});
    }
  });
});
