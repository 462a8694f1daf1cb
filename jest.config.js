/**
 * Two jest projects: `unit` (`npm test`, about 3 minutes on 2 cores) and `integration` (`npm run
 * test:integration`): the slow suites that run whole programs or keras-hub's whole fixtures: the
 * new keras-hub families' fixtures (their compiled steps, int8 forms, presets and stop tokens),
 * keras-hub's int4 presets, the fine-tuning fixtures (one training step, `finetune`), the training
 * CLI's runs, the commands and examples the docs show, the type checks of the built declarations,
 * the package's and the WebAssembly modules' builds, and the child processes that are killed or
 * starved of memory on purpose. `npx jest` runs both, `.ci/run` runs each and sums them.
 */
const INTEGRATION = [
  '/__tests__/hub_models/(qwen|qwen3|gemma3|mistral|smollm3|llama3_step)[^/]*\\.test\\.ts$',
  '/__tests__/interop/keras_int4_files\\.test\\.ts$',
  '/__tests__/finetune/(finetune|train_step)\\.test\\.ts$',
  '/__tests__/train/cli\\.test\\.ts$',
  '/__tests__/docs/(docs|docs_blocks|docs_examples|examples)\\.test\\.ts$',
  '/__tests__/public_api_types\\.test\\.ts$',
  '/__tests__/scripts/(build_package|build_wasm)\\.test\\.ts$',
  '/__tests__/io/atomic_save\\.test\\.ts$',
  '/__tests__/kernels/wasm_kernels_memory_limit\\.test\\.ts$',
];

/**
 * What both projects share. ts-jest transpiles each file alone (tsconfig.jest.json:
 * `isolatedModules`), without type-checking it: `npm run lint` type-checks the whole project once
 * (`tsc --noEmit`), which is faster than a check per test file.
 */
const shared = {
  testEnvironment: '<rootDir>/__tests__/helpers/node_environment.js',
  roots: ['<rootDir>/__tests__'],
  transform: {
    '^.+\\.ts$': ['ts-jest', {tsconfig: 'tsconfig.jest.json'}],
  },
  setupFilesAfterEnv: ['<rootDir>/__tests__/helpers/setup.ts'],
};

/** @type {import('jest').Config} */
module.exports = {
  testTimeout: 120000,
  maxWorkers: 2,
  globalSetup: '<rootDir>/__tests__/helpers/global_setup.js',
  projects: [
    {
      ...shared,
      displayName: 'unit',
      testMatch: ['**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', ...INTEGRATION],
    },
    {...shared, displayName: 'integration', testRegex: INTEGRATION},
  ],
};
