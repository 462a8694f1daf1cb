/**
 * The compile rules of Keras 3's int8 layers (`quantize(model, 'int8')`) for the compiled decoding
 * step (generate/step_program.ts): QuantizedDense and QuantizedEmbedding.
 */
import type {QuantizedDense} from '../../layers/core/quantized_dense';
import type {QuantizedEmbedding} from '../../layers/core/quantized_embedding';
import type {StepCompile} from '../step_program';

/** Keras' int8 product: rows quantized, int8 kernel, scales, bias, activation. */
export const compileQuantizedDense: StepCompile = (layer, [x], emit) => {
  const d = layer as QuantizedDense;
  if (d.kernel == null || d.kernelScale == null) return {declined: 'it is not built'};
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
  const table = emit.int8Weight(e.embeddings, e.embeddingsScale);
  return 'declined' in table ? table : [emit.gatherInt8(ids, table, e.outputDim)];
};
