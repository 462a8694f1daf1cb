import {CONFIG_JSON_LIMITS, jsonDepth, parseBoundedJson} from '../../src/io/bounded_json';

/** The nesting depth of a parsed value, by recursion over it (the reference). */
function depthOf(value: unknown): number {
  if (Array.isArray(value)) return 1 + Math.max(0, ...value.map(depthOf));
  if (value !== null && typeof value === 'object') {
    return 1 + Math.max(0, ...Object.values(value).map(depthOf));
  }
  return 0;
}

describe('jsonDepth', () => {
  // brackets inside strings, escaped quotes and backslashes must not count
  const texts = [
    '1',
    '"[[[{"',
    '[]',
    '{"a": [1, {"b": "]]]"}]}',
    '["\\"[", ["\\\\"], {"k\\"{": [[]]}]',
    '["\\"[[[[[["]',
    '[{"x": "\\\\\\"[[["}, [[[["}"]]]]]',
    '{"a": {"b": {"c": {"d": {}}}}, "e": [[[[[[]]]]]]}',
  ];
  it.each(texts)('%s: the depth of the parsed value', (text) => {
    expect(jsonDepth(text)).toBe(depthOf(JSON.parse(text)));
  });

  it('stops counting past its limit', () => {
    const deep = '['.repeat(1000) + ']'.repeat(1000);
    expect(jsonDepth(deep)).toBe(1000);
    expect(jsonDepth(deep, 10)).toBe(11);
  });
});

describe('parseBoundedJson', () => {
  const limits = {maxChars: 100, maxDepth: 3};

  it('parses JSON within its limits', () => {
    expect(parseBoundedJson('{"a": [[1]]}', 'x.json', limits, 'f')).toEqual({a: [[1]]});
  });

  it('refuses text longer than its limit, naming the file, the size and the limit', () => {
    expect(() => parseBoundedJson(`"${'a'.repeat(200)}"`, 'x.json', limits, 'f')).toThrow(
      /^f: x\.json holds 202 characters of JSON; at most 100 are read/,
    );
  });

  it('refuses nesting deeper than its limit before JSON.parse (200,000 levels)', () => {
    const deep = '{"a":'.repeat(200_000) + '1' + '}'.repeat(200_000);
    const big = {maxChars: 2 ** 24, maxDepth: CONFIG_JSON_LIMITS.maxDepth};
    expect(() => parseBoundedJson(deep, 'config.json', big, 'f')).toThrow(
      `f: config.json nests arrays / objects more than ${big.maxDepth} deep`,
    );
    expect(() => parseBoundedJson('[[[[1]]]]', 'y.json', limits, 'f')).toThrow(/more than 3 deep/);
  });

  it("keeps JSON.parse's reason for a syntax error, without the text it quotes", () => {
    expect(() => parseBoundedJson('{"a": 1', 'x.json', limits, 'f')).toThrow(
      /^f: x\.json is not valid JSON \(.+ at position 7\)\.$/,
    );
    // a response from elsewhere (a redirect) must not reach a message
    let message = '';
    try {
      parseBoundedJson('FOREIGN-SECRET-BYTES{', 'config.json', limits, 'f');
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toBe('f: config.json is not valid JSON (an unexpected character).');
  });
});
