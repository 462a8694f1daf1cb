/**
 * Where the compiled decoding step finds a layer's compile rule (step_program.ts): by the class
 * name tfjs serializes, in the rules registered with {@link registerStepRule} (a model family's
 * layers, a user's own), then the package's built-in rules (step_rules/built_ins.ts). A class
 * without a rule decodes with the eager stepper.
 */
import {contractOf} from '../layers/engine/contract';
import type {StepCompile} from './step_program';
import {PACKAGE_RULES, TFJS_RULES} from './step_rules/built_ins';

const registered = new Map<string, StepCompile>();
/** Registrations so far: a program compiled before one is compiled again (compiled_step.ts). */
let registrations = 0;

/** The number of rules registered so far (a program kept from before a registration is stale). */
export function stepRulesVersion(): number {
  return registrations;
}

const own = (table: Readonly<Record<string, StepCompile>>, name: string) =>
  Object.prototype.hasOwnProperty.call(table, name);

/** The rule of a layer class (its serialized class name), or null when it has none. */
export function stepRuleOf(className: string): StepCompile | null {
  const rule = registered.get(className);
  if (rule != null) return rule;
  if (own(PACKAGE_RULES, className)) return PACKAGE_RULES[className];
  // tfjs' built-in layers carry no contract: a class of that name with one is another class
  if (own(TFJS_RULES, className) && contractOf(className) == null) return TFJS_RULES[className];
  return null;
}

/**
 * Registers the compile rule of a layer class, by the class name tfjs serializes (its static
 * `className`): `generate`'s compiled step then compiles its calls through `rule`. A class that
 * has a rule already (the package's, or one registered before) is refused.
 */
export function registerStepRule(className: string, rule: StepCompile): void {
  if (typeof className !== 'string' || className === '') {
    throw new Error(
      `registerStepRule: expected a class name (a non-empty string), received ${JSON.stringify(className)}`,
    );
  }
  if (typeof rule !== 'function') {
    throw new Error(
      `registerStepRule: expected a rule function for class '${className}', received ${typeof rule}`,
    );
  }
  const builtIn = own(PACKAGE_RULES, className) || own(TFJS_RULES, className);
  if (builtIn || registered.has(className)) {
    throw new Error(
      `registerStepRule: class '${className}' has a compile rule already (` +
        `${builtIn ? "the package's own" : 'registered before'}); expected a class without one`,
    );
  }
  registered.set(className, rule);
  registrations++;
}
