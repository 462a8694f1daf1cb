/**
 * The default of a switch over a union that names every member: a member added to the union and
 * left out of the switch is a type error there (and `@typescript-eslint/switch-exhaustiveness-check`
 * says which), and a value from outside the types (a code across the WebAssembly boundary, a
 * JavaScript caller) is an error at run time, not a case silently skipped.
 */
export function assertNever(value: never, expected: string): never {
  throw new Error(`${expected}, received ${String(value)}`);
}
