"""saveKerasFile's .keras files in Keras 3: scale/save_keras_file.js writes them with the package
(dist/index.cjs: `npm run build` first) together with the package's predictions, and Keras 3.15
(with keras-hub 0.32 for its layers) must load each with `keras.saving.load_model` and predict the
same within 1e-5 (absolute; measured: at most 1.7e-6): a keras-hub-style decoder LM
(TokenAndPositionEmbedding, TransformerDecoder, a causal MultiHeadAttention), an int8 model
(Embedding, Dense and EinsumDense quantized in Keras' int8 scheme: int8 kernels, float32 scales,
QuantizedDTypePolicy), and one model per keras-hub family as the package loads it from the
committed fixtures: GPT2CausalLM, BertTextClassifier, Llama3CausalLM (presets), a Llama 3.1 task
(rope frequency options), keras-hub's int8 GPT-2 preset (int8 blocks, as a DTypePolicyMap, and
token embedding), and Keras' own int8 files of keras-hub decoders and of a functional model with an
int8 MultiHeadAttention (both of which Keras 3.15 cannot load back itself: it builds the blocks'
projections float), the Llama 3 and BERT tasks quantized here (`quantize(model, 'int8')`), and
Keras 3 files whose call options loadKerasModel keeps in the config (a constant start_index of
RotaryEmbedding / PositionEmbedding; a MultiHeadAttention returning its scores, whose zero weights
for fully masked rows are Keras' own; MultiHeadAttention / GroupQueryAttention with Keras 3.15's
use_gate and sliding_window).

    python -m pytest scale/test_save_keras_file.py
"""
import json
import os
import subprocess
import tempfile

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


@pytest.fixture(scope="module")
def written():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["node", os.path.join(HERE, "save_keras_file.js"), tmp], check=True, cwd=ROOT)
        yield tmp


CASES = [
    "decoder_lm",
    "int8",
    "gpt2",
    "bert",
    "llama3",
    "llama31",
    "gpt2_int8",
    "decoder_int8",
    "functional_int8",
    "llama3_int8",
    "bert_int8",
    "start_index",
    "mha_scores",
    "mha_gate_window",
    "gqa_gate",
    "gqa_window_causal",
]
# the layers Keras must hold int8 after loading (a block's int8 sublayers by their paths)
BLOCK_INT8 = [
    "feedforward_intermediate_dense",
    "feedforward_output_dense",
    "self_attention/attention_output",
    "self_attention/key",
    "self_attention/query",
    "self_attention/value",
]
INT8 = {
    "int8": ["dense", "embed", "proj"],
    "gpt2_int8": ["token_embedding"]
    + [f"transformer_layer_{i}/{s}" for i in range(2) for s in BLOCK_INT8],
    "decoder_int8": [f"transformer_decoder{i}/{s}" for i in ("", "_1") for s in BLOCK_INT8],
    "functional_int8": ["dense", "einsum_dense", "einsum_dense_1", "embedding"]
    + [f"multi_head_attention/{s}" for s in ("attention_output", "key", "query", "value")],
    "llama3_int8": ["token_embedding"]
    + [
        f"transformer_layer_{i}/{s}"
        for i in range(2)
        for s in BLOCK_INT8 + ["feedforward_gate_dense"]
    ],
    "bert_int8": ["logits", "pooled_dense", "segment_embedding", "token_embedding"]
    + [
        f"transformer_layer_{i}/{s.replace('self_attention/', 'self_attention_layer/')}"
        for i in range(2)
        for s in BLOCK_INT8
    ],
}


def int8_paths(model):
    return sorted(
        layer.path
        for layer in model._flatten_layers(include_self=False)
        if getattr(layer, "quantization_mode", None) == "int8"
    )


@pytest.mark.parametrize("name", CASES)
def test_keras_loads_what_save_keras_file_wrote(written, name):
    import keras
    import keras_hub  # noqa: F401  (registers keras_hub>TransformerDecoder, ...)

    with open(os.path.join(written, f"{name}.json")) as f:
        ours = json.load(f)
    model = keras.saving.load_model(os.path.join(written, f"{name}.keras"), compile=False)
    if name in INT8:
        assert int8_paths(model) == sorted(INT8[name])
    inputs = [np.asarray(x, dtype) for x, dtype in zip(ours["inputs"], ours["dtypes"])]
    out = model.predict(inputs if len(inputs) > 1 else inputs[0], verbose=0)
    expected = ours["predictions"] if ours["outputs"] > 1 else [ours["predictions"]]
    got = list(out) if ours["outputs"] > 1 else [out]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, np.asarray(e, "float32"), atol=1e-5, rtol=0)
