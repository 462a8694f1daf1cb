"""saveKerasFile's .keras files in Keras 3: scale/save_keras_file.js writes them with the package
(dist/index.cjs: `npm run build` first) together with the package's predictions, and Keras 3.15
(with keras-hub 0.32 for its layers) must load each with `keras.saving.load_model` and predict the
same within 1e-5: a keras-hub-style decoder LM (TokenAndPositionEmbedding, TransformerDecoder, a
causal MultiHeadAttention) and an int8 model (Embedding, Dense and EinsumDense quantized in Keras'
int8 scheme: int8 kernels, float32 scales, QuantizedDTypePolicy).

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


@pytest.mark.parametrize("name", ["decoder_lm", "int8"])
def test_keras_loads_what_save_keras_file_wrote(written, name):
    import keras
    import keras_hub  # noqa: F401  (registers keras_hub>TransformerDecoder, ...)

    with open(os.path.join(written, f"{name}.json")) as f:
        ours = json.load(f)
    model = keras.saving.load_model(os.path.join(written, f"{name}.keras"), compile=False)
    if name == "int8":
        quantized = [l.name for l in model.layers if getattr(l, "quantization_mode", None) == "int8"]
        assert sorted(quantized) == ["dense", "embed", "proj"]
    out = model.predict(np.asarray(ours["ids"], "int32"), verbose=0)
    np.testing.assert_allclose(out, np.asarray(ours["predictions"], "float32"), atol=1e-5, rtol=0)
