/**
 * Two jest projects: `unit` (`npm test`, a few minutes) and `integration` (`npm run
 * test:integration`): the slow suites that run whole programs: the new keras-hub families'
 * fixtures (their compiled steps, int8 forms, presets and stop tokens), the training CLI's runs and
 * the API reference's build (typedoc).
 * `npx jest` runs both, `.ci/run` runs each and sums them.
 */
const INTEGRATION = [
  '/__tests__/hub_models/(qwen|qwen3|gemma3|mistral|smollm3|llama3_step)[^/]*\\.test\\.ts$',
  '/__tests__/train/cli\\.test\\.ts$',
  '/__tests__/docs/docs\\.test\\.ts$',
];

/** What both projects share. */
const shared = {
  testEnvironment: '<rootDir>/__tests__/helpers/node_environment.js',
  roots: ['<rootDir>/__tests__'],
  transform: {
    '^.+\\.ts$': ['ts-jest', {tsconfig: 'tsconfig.json', diagnostics: {warnOnly: false}}],
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
