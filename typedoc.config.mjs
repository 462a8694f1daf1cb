// typedoc configuration for `npm run docs` (output in docs/api/, git-ignored). The build fails
// on any warning, and a missing doc comment on an exported symbol is one.
import {OptionDefaults} from 'typedoc';

/** @type {Partial<import('typedoc').TypeDocOptions>} */
export default {
  entryPoints: ['src/index.ts'],
  tsconfig: 'tsconfig.build.json',
  out: 'docs/api',
  name: 'tfjs-attention',
  readme: 'none',
  excludePrivate: true,
  excludeProtected: true,
  excludeInternal: true,
  excludeExternals: true,
  sort: ['source-order'],
  validation: {
    notExported: false,
    invalidLink: true,
    invalidPath: true,
    rewrittenLink: true,
    notDocumented: true,
    unusedMergeModuleWith: true,
  },
  requiredToBeDocumented: [
    'Module',
    'Namespace',
    'Enum',
    'EnumMember',
    'Variable',
    'Function',
    'Class',
    'Interface',
    'Property',
    'Method',
    'Accessor',
    'TypeAlias',
  ],
  // no source links: the repository has no public URL yet (and a clone's remote is a local path)
  disableSources: true,
  treatWarningsAsErrors: true,
  plugin: ['./scripts/typedoc_require_examples.mjs'],
  modifierTags: [...OptionDefaults.modifierTags, '@nocollapse'],
};
