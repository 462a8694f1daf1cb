/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: '<rootDir>/__tests__/helpers/node_environment.js',
  roots: ['<rootDir>/__tests__'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', {tsconfig: 'tsconfig.json', diagnostics: {warnOnly: false}}],
  },
  testTimeout: 120000,
  maxWorkers: 2,
  globalSetup: '<rootDir>/__tests__/helpers/global_setup.js',
  setupFilesAfterEnv: ['<rootDir>/__tests__/helpers/setup.ts'],
};
