/**
 * Where a keras-hub preset's files come from (src/interop/keras_hub_sources.ts): a preset over
 * http resolves every name it is given against its base URL and refuses, before fetching, any
 * that resolves outside it (checked on the resolved URL, percent-decoded).
 */
import {urlFiles} from '../../src/interop/keras_hub_sources';

describe('urlFiles resolves names under the base URL only', () => {
  const base = 'https://example.com/presets/gpt2/';

  /** A fetch that records what it is asked and answers every URL with some bytes. */
  function recording() {
    const asked: string[] = [];
    const fetch = async (url: string) => {
      asked.push(url);
      return new Response('FOREIGN');
    };
    return {asked, fetch};
  }

  it('names inside the preset are fetched at the URL they name', async () => {
    const {asked, fetch} = recording();
    const files = urlFiles(base, fetch);
    for (const name of ['config.json', 'assets/tokenizer/vocabulary.json', 'a b.json']) {
      expect(await files.has(name)).toBe(true);
    }
    expect(asked).toEqual([
      `${base}config.json`,
      `${base}assets/tokenizer/vocabulary.json`,
      `${base}a%20b.json`,
    ]);
  });

  for (const [name, why] of [
    ['http:attacker.example', /another origin|outside the preset/],
    ['https://attacker.example/x', /resolves to https:\/\/attacker\.example, another origin/],
    ['//attacker.example/x', /resolves to https:\/\/attacker\.example, another origin/],
    ['%2e%2e', /outside the preset/],
    ['%2e%2e/secret.json', /outside the preset/],
    ['..%2fsecret.json', /its part "..%2fsecret.json" reads "..\/secret.json" once decoded/],
    ['assets/../../secret.json', /outside the preset/],
    ['assets/%2E%2E/%2e%2e/x', /outside the preset/],
    ['assets/%5c..%5cx', /its part "%5c..%5cx" reads "\\\\..\\\\x" once decoded/],
    ['config.json?x=1', /"\?", "#", a backslash or NUL/],
    ['', /reads "" once decoded/],
  ] as Array<[string, RegExp]>) {
    it(`${JSON.stringify(name)} is refused before any request`, async () => {
      const {asked, fetch} = recording();
      const files = urlFiles(base, fetch);
      const err = await files.has(name).catch((e: Error) => e);
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).message).toMatch(
        `loadKerasHubPreset: refusing the file name ${JSON.stringify(name)}: `,
      );
      expect((err as Error).message).toMatch(why);
      expect((err as Error).message).toMatch(`expected a path inside the preset at ${base}`);
      expect((err as Error).message).not.toMatch(/FOREIGN/);
      expect(asked).toEqual([]);
    });
  }
});
