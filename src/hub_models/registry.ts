/**
 * The keras-hub families the package builds and loads: one registry, filled by
 * `registerKerasHubFamily` (the built-in families too, through the same call, the first time the
 * registry is read or written: importing this file registers nothing, so an app that only builds
 * layers carries no family).
 */
import * as tf from '@tensorflow/tfjs-core';

import {BERT} from './bert/bert_family';
import {registerStepRule, stepRuleOf} from '../generate/step_rules';
import type {KerasHubFamily} from './family';
import {GPT2} from './gpt2/gpt2_family';
import {LLAMA3} from './llama3/llama3_family';
import {QWEN} from './qwen/qwen_family';
import {QWEN3} from './qwen3/qwen3_family';
import {MISTRAL} from './mistral/mistral_family';
import {SMOLLM3} from './smollm3/smollm3_family';
import {GEMMA3} from './gemma3/gemma3_family';

/** The families the package ships: GPT-2, BERT, Llama 3, Qwen 2.5, Qwen 3, Mistral, SmolLM3, Gemma 3. */
export const KERAS_HUB_FAMILIES: readonly KerasHubFamily[] = [
  GPT2,
  BERT,
  LLAMA3,
  QWEN,
  QWEN3,
  MISTRAL,
  SMOLLM3,
  GEMMA3,
];

const families: KerasHubFamily[] = [];
let builtInsRegistered = false;

/** Registers the built-in families once, before the registry is first read or written. */
function withBuiltIns(): KerasHubFamily[] {
  if (!builtInsRegistered) {
    builtInsRegistered = true;
    for (const family of KERAS_HUB_FAMILIES) registerKerasHubFamily(family);
  }
  return families;
}

/** The keras-hub class names a family declares, and what each one is. */
function classNamesOf(family: KerasHubFamily): Array<[string, string]> {
  return [
    [family.backbone, 'backbone'],
    ...Object.keys(family.tasks).map((t): [string, string] => [t, 'task']),
    [family.tokenizer.className, 'tokenizer'],
  ];
}

/**
 * Adds a keras-hub family: its backbone and task classes are then built by `buildKerasHubModel`
 * and loaded by `loadKerasHubPreset` / `loadKerasModel`, its tokenizer class read from presets,
 * and its own layer classes registered with tfjs' serialization. A backbone, task or tokenizer
 * class name that a registered family already uses is refused (nothing is registered then).
 *
 * ```ts
 * registerKerasHubFamily(MY_FAMILY); // one object: KerasHubFamily
 * const preset = await loadKerasHubPreset('my_preset/');
 * ```
 */
export function registerKerasHubFamily(family: KerasHubFamily): void {
  const registered = withBuiltIns();
  if (family == null || typeof family !== 'object') {
    throw new Error(
      `registerKerasHubFamily: expected a KerasHubFamily object, received ${
        family === null ? 'null' : typeof family
      }`,
    );
  }
  if (family.tokenizer == null || typeof family.tokenizer.className !== 'string') {
    throw new Error(
      `registerKerasHubFamily: expected family ${JSON.stringify(family.name)} to declare its ` +
        `tokenizer class (with a className and fileAssets), received ${String(family.tokenizer)}`,
    );
  }
  const own = classNamesOf(family);
  for (const [name, what] of own) {
    if (own.filter(([n]) => n === name).length > 1) {
      throw new Error(
        `registerKerasHubFamily: family ${JSON.stringify(family.name)} names the class ` +
          `${JSON.stringify(name)} twice; expected its backbone, task and tokenizer classes ` +
          `to have distinct names`,
      );
    }
    for (const other of registered) {
      const taken = classNamesOf(other).find(([n]) => n === name);
      if (taken != null) {
        throw new Error(
          `registerKerasHubFamily: the ${what} class ${JSON.stringify(name)} of family ` +
            `${JSON.stringify(family.name)} is already registered (the ${taken[1]} class of ` +
            `family ${JSON.stringify(other.name)}); expected class names no registered family uses`,
        );
      }
    }
  }
  const rules = Object.entries(family.stepRules ?? {});
  for (const [className, rule] of rules) {
    if (typeof rule !== 'function' || stepRuleOf(className) != null) {
      throw new Error(
        `registerKerasHubFamily: family ${JSON.stringify(family.name)} gives class ` +
          `${JSON.stringify(className)} ${
            typeof rule !== 'function' ? `a ${typeof rule} as its compile rule` : 'a compile rule'
          }; expected a function for a class without one (it ${
            typeof rule !== 'function' ? 'is not a function' : 'has one already'
          })`,
      );
    }
  }
  for (const cls of family.layers) tf.serialization.registerClass(cls);
  for (const [className, rule] of rules) registerStepRule(className, rule);
  registered.push(family);
}

/** The registered families, the built-in ones first. */
export function kerasHubFamilies(): readonly KerasHubFamily[] {
  return withBuiltIns();
}

/** The family whose backbone or task class is `className`, or null. */
export function familyOfClass(className: string): KerasHubFamily | null {
  return (
    withBuiltIns().find(
      (f) => f.backbone === className || Object.prototype.hasOwnProperty.call(f.tasks, className),
    ) ?? null
  );
}

/** Every keras-hub backbone and task class name the registered families build. */
export function kerasHubClassNames(): string[] {
  return withBuiltIns().flatMap((f) => [f.backbone, ...Object.keys(f.tasks)]);
}
