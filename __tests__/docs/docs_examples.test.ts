// The `@example` blocks of the doc comments in src/ (each layer class has one; `npm run docs`
// fails without it) are correct code: each type-checks with `tsc --strict` against the built
// declarations (dist/index.d.ts, from jest's globalSetup) and runs against the built package.
import {execFileSync} from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as ts from 'typescript';

const root = path.resolve(__dirname, '..', '..');
const outDir = path.join(root, '__tests__/.generated/doc_examples');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, {withFileTypes: true}).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** `[name, code]` of every ```ts block after an `@example` tag, named by the class it documents. */
function docExamples(): Array<[string, string]> {
  const found: Array<[string, string]> = [];
  for (const file of sourceFiles(path.join(root, 'src'))) {
    const text = fs.readFileSync(file, 'utf8');
    const re =
      / \* @example\n \* ```ts\n((?: \*.*\n)*?) \* ```\n(?: \*.*\n)*? \*\/\nexport (?:abstract )?class (\w+)/g;
    for (const m of text.matchAll(re)) {
      const code = m[1].replace(/^ \* ?/gm, '');
      found.push([m[2], code]);
    }
  }
  return found.sort(([a], [b]) => a.localeCompare(b));
}

const examples = docExamples();

describe('doc comment examples', () => {
  it('every layer class exported by src/index.ts has one (and KerasAdam)', () => {
    expect(examples.map(([name]) => name)).toEqual(
      [
        'AdditiveAttention',
        'Attention',
        'CachedMultiHeadAttention',
        'Dense',
        'DotProductAttention',
        'EinsumDense',
        'Embedding',
        'GetItem',
        'GlobalAveragePooling1D',
        'GroupQueryAttention',
        'KerasAdam',
        'LlamaAttention',
        'LlamaLayerNorm',
        'LlamaTransformerDecoder',
        'MultiHeadAttention',
        'PositionEmbedding',
        'QuantizedDense',
        'QuantizedEmbedding',
        'ReversibleEmbedding',
        'RotaryEmbedding',
        'SinePositionEncoding',
        'TokenAndPositionEmbedding',
        'TransformerDecoder',
        'TransformerEncoder',
        'QwenAttention',
        'QwenLayerNorm',
        'QwenTransformerDecoder',
        'Qwen3Attention',
        'Qwen3LayerNorm',
        'Qwen3TransformerDecoder',
        'CachedMistralAttention',
        'MistralLayerNormalization',
        'MistralTransformerDecoder',
        'RMSNormalization',
        'SmolLM3Attention',
        'SmolLM3DecoderLayer',
        'SmolLM3RotaryEmbedding',
        'Gemma3RMSNormalization',
        'CachedGemma3Attention',
        'Gemma3DecoderBlock',
        'Gemma3EmbeddingScale',
        'Gemma3MeanPooling',
        'UnitNormalization',
      ].sort((a, b) => a.localeCompare(b)),
    );
  });

  it('type-check with tsc --strict against dist/index.d.ts', () => {
    fs.rmSync(outDir, {recursive: true, force: true});
    fs.mkdirSync(outDir, {recursive: true});
    for (const [name, code] of examples) {
      fs.writeFileSync(path.join(outDir, `${name}.ts`), `${code}\nexport {};\n`);
    }
    const config = {
      compilerOptions: {
        target: 'ES2019',
        module: 'commonjs',
        moduleResolution: 'node',
        lib: ['ES2020', 'DOM'],
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: [],
        baseUrl: '.',
        paths: {'tfjs-attention': [path.relative(outDir, path.join(root, 'dist/index.d.ts'))]},
      },
      include: ['*.ts'],
    };
    fs.writeFileSync(path.join(outDir, 'tsconfig.json'), JSON.stringify(config, null, 2));
    let output = '';
    try {
      execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', outDir], {
        cwd: root,
        encoding: 'utf8',
        stdio: 'pipe',
      });
    } catch (e) {
      const err = e as {stdout?: string; stderr?: string};
      output = `${err.stdout ?? ''}${err.stderr ?? ''}` || String(e);
    }
    expect(output).toBe('');
  });

  it.each(examples)('%s runs against the built package', (_name, code) => {
    const js = ts.transpileModule(code, {
      compilerOptions: {module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2019},
    }).outputText;
    const load = (id: string): unknown =>
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- the example's imports
      require(id === 'tfjs-attention' ? path.join(root, 'dist/index.cjs') : id);
    const tf = load('@tensorflow/tfjs') as typeof import('@tensorflow/tfjs');
    expect(() => tf.tidy(() => new Function('require', 'exports', js)(load, {}))).not.toThrow();
  });
});
