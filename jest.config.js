/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/__tests__'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', {tsconfig: 'tsconfig.json', diagnostics: {warnOnly: false}}],
  },
  testTimeout: 120000,
  maxWorkers: 2,
  setupFilesAfterEnv: ['<rootDir>/__tests__/helpers/setup.ts'],
};
