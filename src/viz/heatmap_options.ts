/**
 * Validation of the heatmap options, shared by the SVG and PNG renderers: every option is
 * checked against what it may hold and, for labels and titles, against the grid it labels, so a
 * bad option is an error that names it rather than a JavaScript error or a silently odd picture.
 */

type Kind = 'string' | 'boolean' | 'positive' | 'positiveInteger' | 'count' | 'labels';

interface OptionRule {
  kind: Kind;
  /** For labels: what the list labels, and how many entries it needs. */
  of?: {what: string; count: number};
}

function describe(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (Array.isArray(value)) return `an array of ${value.length}`;
  return value === null ? 'null' : `${typeof value} ${JSON.stringify(value)}`;
}

function check(caller: string, name: string, value: unknown, rule: OptionRule): void {
  const bad = (expected: string) => {
    throw new Error(`${caller}: expected ${name} to be ${expected}, received ${describe(value)}`);
  };
  switch (rule.kind) {
    case 'string':
      if (typeof value !== 'string') bad('a string');
      return;
    case 'boolean':
      if (typeof value !== 'boolean') bad('true or false');
      return;
    case 'positive':
      if (!(typeof value === 'number' && Number.isFinite(value) && value > 0)) bad('a number > 0');
      return;
    case 'positiveInteger':
      if (!(typeof value === 'number' && Number.isInteger(value) && value > 0)) {
        bad('a whole number of pixels > 0');
      }
      return;
    case 'count':
      if (!(typeof value === 'number' && Number.isInteger(value) && value >= 0)) {
        bad('a whole number of pixels >= 0');
      }
      return;
    case 'labels': {
      const {what, count} = rule.of as {what: string; count: number};
      if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
        bad(`an array of ${count} strings (one per ${what})`);
      }
      if ((value as string[]).length !== count) {
        throw new Error(
          `${caller}: expected ${name} to hold ${count} strings (one per ${what}), received ` +
            `${(value as string[]).length}`,
        );
      }
      return;
    }
  }
}

/** The grid being drawn: `rows x cols` matrices of `queries x keys`. */
export interface GridSize {
  rows: number;
  cols: number;
  queries: number;
  keys: number;
}

/** The options of the SVG heatmap and their rules for a grid. */
export function svgRules(g: GridSize): Record<string, OptionRule> {
  return {
    xLabels: {kind: 'labels', of: {what: 'key', count: g.keys}},
    yLabels: {kind: 'labels', of: {what: 'query', count: g.queries}},
    title: {kind: 'string'},
    titles: {kind: 'labels', of: {what: 'column of matrices', count: g.cols}},
    xLabel: {kind: 'string'},
    yLabel: {kind: 'string'},
    cellSize: {kind: 'positive'},
    blankZeros: {kind: 'boolean'},
  };
}

/** The options of the PNG heatmap and their rules. */
export const PNG_RULES: Record<string, OptionRule> = {
  cellSize: {kind: 'positiveInteger'},
  gap: {kind: 'count'},
  blankZeros: {kind: 'boolean'},
};

/** Throws on an unknown option or an option that breaks its rule; undefined options are skipped. */
export function validateOptions(
  caller: string,
  options: unknown,
  rules: Record<string, OptionRule>,
): void {
  if (options === undefined) return;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new Error(`${caller}: expected an options object, received ${describe(options)}`);
  }
  for (const [name, value] of Object.entries(options)) {
    const rule = rules[name];
    if (rule === undefined) {
      throw new Error(
        `${caller}: unknown option '${name}'; the options are ${Object.keys(rules).join(', ')}`,
      );
    }
    if (value !== undefined) check(caller, name, value, rule);
  }
}
