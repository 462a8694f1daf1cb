/**
 * Where a keras-hub preset's files come from (src/interop/keras_hub_sources.ts): a preset over
 * http resolves every name it is given against its base URL and refuses, before fetching, any
 * that resolves outside it (checked on the resolved URL, percent-decoded); a body is counted as
 * it streams in, so one over the limit is refused without the rest being read.
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

describe('urlFiles counts a body as it streams in', () => {
  const base = 'https://example.com/presets/gpt2/';

  /** A fetch answering one body of `total` bytes in 1 KiB chunks, no Content-Length unless `declared`. */
  function streaming(total: number, declared?: number) {
    const state = {pulled: 0, cancelled: false};
    const fetch = async () =>
      new Response(
        new ReadableStream<Uint8Array>({
          pull(controller) {
            if (state.pulled >= total) {
              controller.close();
              return;
            }
            const n = Math.min(1024, total - state.pulled);
            controller.enqueue(new Uint8Array(n).fill((state.pulled / 1024) & 0xff));
            state.pulled += n;
          },
          cancel() {
            state.cancelled = true;
          },
        }),
        declared == null ? {} : {headers: {'content-length': String(declared)}},
      );
    return {state, fetch};
  }

  it('a body over the limit without a Content-Length: refused once over, its stream cancelled', async () => {
    const {state, fetch} = streaming(1024 * 1024);
    const files = urlFiles(base, fetch);
    await expect(files.read('assets/tokenizer/vocabulary.json', 10_000)).rejects.toThrow(
      'loadKerasHubPreset: assets/tokenizer/vocabulary.json holds 10240 bytes, more than the ' +
        '10000 allowed',
    );
    expect(state.cancelled).toBe(true);
    // what was read: the limit and a few chunks the stream queued ahead, not the 1 MiB body
    expect(state.pulled).toBeLessThan(16 * 1024);
  });

  it('a body within the limit arrives whole, with or without a (right or short) Content-Length', async () => {
    for (const declared of [undefined, 5000, 1000]) {
      const {state, fetch} = streaming(5000, declared);
      const bytes = await urlFiles(base, fetch).read('merges.txt', 5000);
      expect(bytes.length).toBe(5000);
      expect([bytes[0], bytes[1023], bytes[1024], bytes[4999]]).toEqual([0, 0, 1, 4]);
      expect(state.cancelled).toBe(false);
    }
  });
});
