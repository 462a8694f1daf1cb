/** The fenced code blocks of the user's documentation (README.md and docs/*.md). */
import * as fs from 'fs';
import * as path from 'path';

export const root = path.resolve(__dirname, '..', '..');

export interface DocBlock {
  /** The markdown file, relative to the repository root. */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The fence's language (`js`, `ts`, `sh`, ...); '' when the fence names none. */
  lang: string;
  code: string;
}

/** README.md and every markdown file of docs/ (not the generated API reference). */
export function docFiles(): string[] {
  const docs = fs
    .readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

export function blocksOf(file: string): DocBlock[] {
  const lines = fs.readFileSync(path.join(root, file), 'utf8').split('\n');
  const blocks: DocBlock[] = [];
  let open: {line: number; lang: string; body: string[]} | null = null;
  lines.forEach((text, i) => {
    const fence = /^```(\S*)\s*$/.exec(text);
    if (open == null) {
      if (fence) open = {line: i + 1, lang: fence[1], body: []};
    } else if (text === '```') {
      blocks.push({file, line: open.line, lang: open.lang, code: open.body.join('\n') + '\n'});
      open = null;
    } else {
      open.body.push(text);
    }
  });
  if (open != null) {
    throw new Error(`${file}:${(open as {line: number}).line}: code block never closed`);
  }
  return blocks;
}

/** A `js` block is an ES module when it imports, else a CommonJS script. */
export function isEsm(code: string): boolean {
  return /^import\s.+\sfrom\s/m.test(code);
}
