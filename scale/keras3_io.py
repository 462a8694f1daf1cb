"""Reading models saved by tfjs-attention in Keras 3, and the way back.

`pack(folder, path)` turns a folder written by `fileSystem(dir).save(await toKeras3Artifacts(a))`
(model.json holds a Keras 3 config, weights are named by their Keras 3 paths) into a `.keras`
file: config.json, metadata.json and model.weights.h5 in a zip, which `keras.saving.load_model`
reads. `to_tfjs(path, folder)` runs `tensorflowjs_converter --input_format keras_keras`.

    python scale/keras3_io.py <tfjs folder> <model.keras>
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

DTYPES = {"float32": np.float32, "int32": np.int32, "bool": np.bool_}


def read_folder(folder):
    """The Keras 3 config and the weights {keras path: array} of a folder saved by the package."""
    with open(os.path.join(folder, "model.json")) as f:
        model_json = json.load(f)
    if model_json.get("format") != "keras3-config":
        raise ValueError(
            f"{folder}/model.json is not a Keras 3 export (format {model_json.get('format')!r}); "
            "save the model with toKeras3Artifacts"
        )
    weights = {}
    for group in model_json["weightsManifest"]:
        data = b"".join(open(os.path.join(folder, p), "rb").read() for p in group["paths"])
        offset = 0
        for spec in group["weights"]:
            dtype = np.dtype(DTYPES[spec["dtype"]])
            n = int(np.prod(spec["shape"], dtype=np.int64))
            weights[spec["name"]] = np.frombuffer(data, dtype, n, offset).reshape(spec["shape"])
            offset += n * dtype.itemsize
    return model_json["modelTopology"], weights, model_json.get("userDefinedMetadata", {})


def pack(folder, path):
    """Writes the `.keras` file of a folder saved with toKeras3Artifacts; returns its metadata."""
    import h5py
    import keras

    config, weights, meta = read_folder(folder)
    with tempfile.TemporaryDirectory() as tmp:
        h5 = os.path.join(tmp, "model.weights.h5")
        with h5py.File(h5, "w") as f:
            for name, value in weights.items():
                f.create_dataset(name, data=value)
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("config.json", json.dumps(config))
            z.writestr(
                "metadata.json",
                json.dumps({"keras_version": keras.__version__, "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S")}),
            )
            z.write(h5, "model.weights.h5")
    return meta


def strip_optimizer(path):
    """Removes the optimizer's variables from a `.keras` file (tfjs has no use for them)."""
    import h5py

    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(path) as z:
            z.extractall(tmp)
            names = z.namelist()
        with h5py.File(os.path.join(tmp, "model.weights.h5"), "a") as f:
            if "optimizer" in f:
                del f["optimizer"]
        with zipfile.ZipFile(path, "w") as z:
            for name in names:
                z.write(os.path.join(tmp, name), name)


def load(path):
    """`keras.saving.load_model` with keras-hub's layers registered."""
    import keras
    import keras_hub  # noqa: F401  (registers keras_hub>... classes)

    return keras.saving.load_model(path, compile=False)


def to_tfjs(path, folder):
    """`tensorflowjs_converter --input_format keras_keras path folder`."""
    converter = os.path.join(os.path.dirname(sys.executable), "tensorflowjs_converter")
    cmd = [converter] if os.path.exists(converter) else [sys.executable, "-m", "tensorflowjs.converters.converter"]
    subprocess.run(cmd + ["--input_format", "keras_keras", path, folder], check=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    pack(sys.argv[1], sys.argv[2])
    print(f"wrote {sys.argv[2]}")
