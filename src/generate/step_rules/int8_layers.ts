/**
 * The compile rules of Keras 3's int8 and int4 layers (`quantize(model, 'int8' | 'int4')`) for
 * the compiled decoding step (generate/step_program.ts): QuantizedDense and QuantizedEmbedding.
 */
import type {Int4Weight} from '../../layers/core/quantization';
import type {QuantizedDense} from '../../layers/core/quantized_dense';
import type {QuantizedEmbedding} from '../../layers/core/quantized_embedding';
import type {StepCompile, StepDecline, StepEmitter, StepValue} from '../step_program';

/** Keras' int4 product (weight-only): the int4 kernel, bias, activation. */
function compileInt4Dense(
  d: QuantizedDense,
  x: StepValue,
  emit: StepEmitter,
): StepValue[] | StepDecline {
  const act = emit.activation(d.getConfig().activation);
  if (act == null) {
    return {declined: `its activation '${String(d.getConfig().activation)}' does not compile`};
  }
  const kernel = emit.int4Weight(d.int4Weights()[0]);
  const bias = d.bias == null ? null : emit.weight(d.bias);
  if ('declined' in kernel) return kernel;
  if (bias != null && 'declined' in bias) return bias;
  return [emit.denseInt4(x, kernel, bias, d.units, act)];
}

/** Keras' int4 lookup: the table's rows at the ids, dequantized. */
export function compileInt4Lookup(
  w: Int4Weight,
  ids: StepValue,
  emit: StepEmitter,
): StepValue[] | StepDecline {
  const table = emit.int4Weight(w);
  return 'declined' in table ? table : [emit.gatherInt4(ids, table, w.layout.cols)];
}

/** Keras' int8 product: rows quantized, int8 kernel, scales, bias, activation. */
export const compileQuantizedDense: StepCompile = (layer, [x], emit) => {
  const d = layer as QuantizedDense;
  if (d.kernel == null || d.kernelScale == null) return {declined: 'it is not built'};
  if (d.quantizationMode === 'int4') return compileInt4Dense(d, x, emit);
  const act = emit.activation(d.getConfig().activation);
  if (act == null) {
    return {
      declined: `its activation '${String(d.getConfig().activation)}' does not compile`,
    };
  }
  const kernel = emit.int8Weight(d.kernel, d.kernelScale);
  const bias = d.bias == null ? null : emit.weight(d.bias);
  if ('declined' in kernel) return kernel;
  if (bias != null && 'declined' in bias) return bias;
  return [emit.denseInt8(x, kernel, bias, d.units, act)];
};

/** Keras' int8 lookup: int8 rows at the ids, each / its row's scale. */
export const compileQuantizedEmbedding: StepCompile = (layer, [ids], emit) => {
  const e = layer as QuantizedEmbedding;
  if (e.embeddings == null || e.embeddingsScale == null) return {declined: 'it is not built'};
  if (e.quantizationMode === 'int4') return compileInt4Lookup(e.int4Weights()[0], ids, emit);
  const table = emit.int8Weight(e.embeddings, e.embeddingsScale);
  return 'declined' in table ? table : [emit.gatherInt8(ids, table, e.outputDim)];
};
