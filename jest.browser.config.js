/** The browser tests (npm run test:browser): headless Chromium driven by playwright-core. */
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: '<rootDir>/__tests__/helpers/node_environment.js',
  roots: ['<rootDir>/browser'],
  testMatch: ['**/*.test.ts'],
  transform: {'^.+\\.ts$': ['ts-jest', {tsconfig: 'tsconfig.jest.json'}]},
  testTimeout: 300000,
  maxWorkers: 1,
  globalSetup: '<rootDir>/browser/global_setup.js',
  setupFilesAfterEnv: ['<rootDir>/__tests__/helpers/setup.ts'],
};
