/**
 * Compiles a cached-decoding plan (graph_plan.ts) into one program of kernel ops
 * (kernels/step_kernels_api.ts) through the compile rules of its layers' classes (found by class
 * name: step_rules.ts), or says which node has no rule or which rule declined: the loop over the
 * plan's nodes, each compiled into the program builder (program_builder.ts), which cuts the
 * program to each row's last position after the last attention op once it is built. The program
 * is independent of the batch, the step's length and the memory: the runtime (compiled_step.ts)
 * allocates its values and runs it.
 */
import type {layers} from '@tensorflow/tfjs-layers';

import {isLoraLayer, type LoraLayer} from '../layers/core/lora';
import type {GraphLayer, GraphNode} from '../layers/engine/contract';
import {kerasFlattenedLayers} from '../layers/engine/keras_layer_order';
import type {StepPlan} from './graph_plan';
import {ProgramBuilder, StepProgram} from './program_builder';
import type {StepDecline, StepValue} from './step_program';
import {stepRuleOf} from './step_rules';

export type {PackedInt8, ProgramValue, StepProgram} from './program_builder';
export type {ProgramOp} from './step_ops';

export type CompileResult = {program: StepProgram; reason: null} | {program: null; reason: string};

function describe(layer: GraphLayer): string {
  return `layer '${layer.name}' (${layer.getClassName()})`;
}

/** Compiles `plan`, or gives the reason it cannot be compiled. */
export function compileStep(plan: StepPlan): CompileResult {
  function compileLayer(
    layer: GraphLayer,
    inputs: StepValue[],
    node: GraphNode | null,
  ): StepValue[] | StepDecline {
    const compile = stepRuleOf(layer.getClassName());
    if (compile == null) return {declined: 'its class has no compile rule'};
    let compiled: StepValue[] | StepDecline;
    try {
      compiled = compile(layer, inputs, builder.emit, node);
    } catch (e) {
      return {declined: (e as Error).message};
    }
    if ('declined' in compiled) return compiled; // a rule's own reason (an EinsumDense's LoRA)
    // the layer, or a sublayer its rule read the weights of (a TransformerDecoder's Dense), with
    // LoRA's adapters, which no rule compiles
    const adapted = [layer, ...kerasFlattenedLayers(layer as unknown as layers.Layer)].find(
      (l) => isLoraLayer(l) && l.lora != null,
    ) as LoraLayer | undefined;
    if (adapted == null) return compiled;
    const which = adapted === layer ? 'it has' : `its sublayer '${adapted.name}' has`;
    return {
      declined:
        `${which} LoRA adapters (rank ${adapted.lora?.rank}); the eager stepper applies them ` +
        '(mergeLora(model) merges float ones into their weights, which compile)',
    };
  }
  const builder = new ProgramBuilder((layer, inputs) => compileLayer(layer, inputs, null));

  if (plan.input.dtype !== 'int32') {
    // a float32 ids input goes through the model as floats (e.g. a ReversibleEmbedding reverses)
    return fail(`the ids input is ${plan.input.dtype}, not int32`);
  }
  const known = new Map<number, StepValue>([[plan.input.id, builder.ids]]);
  for (const p of plan.nodes) {
    for (const t of [...p.node.inputTensors, ...p.node.outputTensors]) {
      if (t === plan.padding) continue;
      if (t.rank !== 3 && t !== plan.input) {
        return fail(
          `${describe(p.layer)}: a value of rank ${t.rank} (only [batch, T, features] compiles)`,
        );
      }
    }
    const inputs = p.node.inputTensors
      .filter((x) => x !== plan.padding)
      .map((x) => known.get(x.id));
    if (inputs.some((x) => x == null))
      return fail(`${describe(p.layer)}: an input the step does not know`);
    builder.keyMask(plan.masksZeroIds && p.cache?.entry.readsKerasMasks === true);
    const result = compileLayer(p.layer, inputs as StepValue[], p.node);
    if ('declined' in result) return fail(`${describe(p.layer)}: ${result.declined}`);
    if (result.length !== p.node.outputTensors.length) {
      return fail(
        `${describe(p.layer)}: its rule gave ${result.length} outputs, the node has ${p.node.outputTensors.length}`,
      );
    }
    for (const [j, t] of p.node.outputTensors.entries()) {
      const width = t.shape[2];
      if (result[j].width !== width) {
        return fail(
          `${describe(p.layer)}: its rule gave rows of ${result[j].width} for an output of width ${width}`,
        );
      }
      known.set(t.id, result[j]);
    }
  }
  const logits = known.get(plan.output.id);
  if (logits == null || logits.dtype !== 'float32') {
    return fail('the logits are not a float32 value of the step');
  }
  return {program: builder.finish(logits), reason: null};
}

function fail(reason: string): CompileResult {
  return {program: null, reason};
}
