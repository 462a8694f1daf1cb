"""The scale/ round trip on a tiny run: models/reverse -> Keras 3 (JAX, 2 simulated CPU devices,
DataParallel and ModelParallel) -> tensorflowjs_converter -> tfjs-attention in Node, which must
predict what Keras predicts (train_distributed.py fails otherwise). Needs `npm run build`.

    python -m pytest scale/test_round_trip.py
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def run(out, *extra):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", KERAS_BACKEND="jax")
    cmd = [sys.executable, os.path.join(HERE, "train_distributed.py"), "--model", os.path.join(ROOT, "models", "reverse"),
           "--out", out, "--epochs", "1", "--train-size", "256", "--from-scratch", *extra]
    subprocess.run(cmd, check=True, env=env, cwd=ROOT)
    with open(os.path.join(out, "run.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("extra", [[], ["--model-parallel"]], ids=["data-parallel", "model-parallel"])
def test_round_trip(extra):
    with tempfile.TemporaryDirectory() as tmp:
        record = run(os.path.join(tmp, "run"), *extra)
    assert len(record["devices"]) == 2
    assert record["mesh"]["kind"] == ("ModelParallel" if extra else "DataParallel")
    assert max(record["max_abs_error"].values()) <= 1e-5
    assert record["epochs_log"][-1]["val_loss"] < record["start"]["val_loss"]


def test_pack_refuses_a_plain_tfjs_folder():
    import keras3_io

    with pytest.raises(ValueError, match="save the model with toKeras3Artifacts"):
        keras3_io.read_folder(os.path.join(ROOT, "models", "reverse"))


def test_pack_loads_a_committed_export():
    import keras3_io

    d = os.path.join(ROOT, "__tests__", "fixtures", "tfjs_to_keras3", "multi_head_attention_valid_lens")
    io = json.load(open(os.path.join(d, "io.json")))
    keras_out = json.load(open(os.path.join(d, "keras.json")))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.keras")
        keras3_io.pack(d, path)
        model = keras3_io.load(path)
    inputs = [np.asarray(t["data"], "float32").astype(t["dtype"]).reshape(t["shape"]) for t in io["keras_inputs"]]
    out = np.asarray(model.predict(inputs, verbose=0))
    np.testing.assert_allclose(out.reshape(-1), keras_out["outputs"][0]["data"], atol=1e-5)
