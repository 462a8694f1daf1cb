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
import stat
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import safe_paths  # noqa: E402

# model.json is read whole: a bound on its size (the committed models' are a few KB)
MAX_JSON_BYTES = 64 * 1024 * 1024


def read_model_json(folder):
    """`folder/model.json`, which must be a regular file (a link to /dev/zero is refused)."""
    path = os.path.join(folder, "model.json")
    try:
        st = os.stat(path)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_JSON_BYTES:
        raise ValueError(f"refusing {path}: expected a regular file of at most {MAX_JSON_BYTES} bytes")
    return json.loads(safe_paths.read_regular(os.path.realpath(path), st.st_size))


def read_folder(folder):
    """The Keras 3 config and the weights {keras path: array} of a folder saved by the package.

    Every weights path is checked first (safe_paths.weights_files): relative, no `..`, inside the
    folder with links followed, a regular file, sizes adding up to what the manifest declares."""
    model_json = read_model_json(folder)
    if model_json.get("format") != "keras3-config":
        raise ValueError(
            f"{folder}/model.json is not a Keras 3 export (format {model_json.get('format')!r}); "
            "save the model with toKeras3Artifacts"
        )
    groups = safe_paths.weights_files(folder, model_json.get("weightsManifest"))
    import numpy as np

    dtypes = {"float32": np.float32, "int32": np.int32, "bool": np.bool_}
    weights = {}
    for group, files, _ in groups:
        data = b"".join(safe_paths.read_regular(f, os.stat(f).st_size) for f in files)
        offset = 0
        for spec in group["weights"]:
            dtype = np.dtype(dtypes[spec["dtype"]])
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
    """Removes the optimizer's variables from a `.keras` file (tfjs has no use for them). The
    archive is rewritten from its entries' bytes (safe_paths.rewrite_zip): no entry is extracted
    under its own name, and names with `..`, absolute ones and links are refused."""
    import h5py

    def drop_optimizer(weights):
        with h5py.File(weights, "a") as f:
            if "optimizer" in f:
                del f["optimizer"]

    safe_paths.rewrite_zip(path, drop_optimizer)


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
