"""A tfjs-attention model, trained data-parallel in Keras 3 (JAX) over every device, and back.

    npm run build
    XLA_FLAGS=--xla_force_host_platform_device_count=2 \
      python scale/train_distributed.py --model models/reverse --out scratch/scale-run

1. `node scale/export_keras3.js` saves the model with toKeras3Artifacts (valid lengths become a
   boolean attention-mask input `<lengths>_mask`); `keras3_io.pack` writes it as a .keras file.
2. Keras 3 loads it on the JAX backend under `keras.distribution.DataParallel` over
   `keras.distribution.list_devices()` (with `--model-parallel`: `ModelParallel` with a
   `LayoutMap` that shards the attention kernels by heads over a ("batch", "model") mesh).
3. It trains on the model's task (the `reverse` task of userDefinedMetadata, generated here),
   saves `trained.keras`, converts it with `tensorflowjs_converter --input_format keras_keras`,
   and runs Node: the package's loadKerasModel must predict what Keras predicts (max abs error
   at most --tolerance, default 1e-5).

Writes into --out: run.json (devices, mesh, losses, times, errors), loss.csv, log.txt, model.keras
(before training), trained.keras, tfjs/ (the converted model) and io.json (inputs and Keras'
predictions). On GPUs or TPUs nothing changes: list_devices() returns them.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import keras3_io  # noqa: E402
import safe_paths  # noqa: E402


class Log:
    def __init__(self, path):
        self.f = open(path, "w")

    def __call__(self, *parts):
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()


def reverse_data(meta, masks, n, seed):
    """The `reverse` task (src/train/tasks/reverse.ts): tokens 1..vocab-1 padded with padId to
    maxLen, targets the tokens reversed; the lengths input as the mask toKeras3Artifacts made."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vocab, max_len, pad, min_len = meta["vocabSize"], meta["maxLen"], meta["padId"], meta["minLen"]
    lengths = rng.integers(min_len, max_len + 1, size=n)
    tokens = np.full((n, max_len), pad, np.int32)
    targets = np.full((n, max_len), pad, np.int32)
    for i, length in enumerate(lengths):
        tokens[i, :length] = rng.integers(1, vocab, size=length)
        targets[i, :length] = tokens[i, :length][::-1]
    inputs = {"tokens": tokens}
    for m in masks.values():
        _, tq, tk = m["shape"]
        inputs[m["input"]] = np.broadcast_to(np.arange(tk)[None, None, :] < lengths[:, None, None], (n, tq, tk)).copy()
    return inputs, targets


def distribution(args, log):
    import keras

    devices = keras.distribution.list_devices()
    n = len(devices)
    if not args.model_parallel:
        dist = keras.distribution.DataParallel(devices=devices)
        return dist, devices, {"kind": "DataParallel", "shape": [n], "axis_names": ["batch"]}
    model_dim = args.model_axis or n
    if n % model_dim:
        raise SystemExit(f"--model-axis {model_dim} does not divide the {n} devices")
    mesh = keras.distribution.DeviceMesh(shape=(n // model_dim, model_dim), axis_names=("batch", "model"), devices=devices)
    layout = keras.distribution.LayoutMap(mesh)
    # attention kernels by heads: query/key/value [dim, heads, head_dim], output [heads, head_dim, dim]
    layout[r".*/(query|key|value)/kernel"] = (None, "model", None)
    layout[r".*/(query|key|value)/bias"] = ("model", None)
    layout[r".*/attention_output/kernel"] = ("model", None, None)
    dist = keras.distribution.ModelParallel(layout_map=layout, batch_dim_name="batch")
    return dist, devices, {"kind": "ModelParallel", "shape": [n // model_dim, model_dim], "axis_names": ["batch", "model"]}


def convert_back(keras_path, out):
    """tensorflowjs_converter --input_format keras_keras, with keras-hub's classes registered."""
    code = (
        "import sys, types; sys.modules['tensorflow_decision_forests'] = types.ModuleType('tensorflow_decision_forests');"
        "import keras_hub; from tensorflowjs.converters import converter;"
        f"converter.convert(['--input_format', 'keras_keras', '--output_format', 'tfjs_layers_model', {keras_path!r}, {out!r}])"
    )
    env = dict(os.environ, KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES="")
    env.pop("XLA_FLAGS", None)
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def predict_in_node(tfjs_dir, io_path, backend="cpu"):
    out = subprocess.run(
        ["node", os.path.join(HERE, "predict_tfjs.js"), tfjs_dir, io_path, backend],
        check=True, capture_output=True, text=True, cwd=ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["maxAbsError"]


def tensor_json(x):
    import numpy as np

    x = np.asarray(x)
    dtype = "bool" if x.dtype == np.bool_ else "int32" if x.dtype.kind in "iu" else "float32"
    data = x.reshape(-1).tolist() if dtype != "float32" else [float(v) for v in x.astype(np.float32).reshape(-1)]
    return {"dtype": dtype, "shape": list(x.shape), "data": data}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="model folder saved by tfjs-attention (model.json + weights)")
    p.add_argument("--out", required=True, help="output folder (replaced: only when missing, empty or an earlier run's)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--train-size", type=int, default=4096)
    p.add_argument("--batch-size", type=int, default=64, help="global batch, split over the batch axis")
    p.add_argument("--learning-rate", type=float, default=3e-3)
    p.add_argument("--model-parallel", action="store_true", help="shard attention kernels by heads (ModelParallel)")
    p.add_argument("--model-axis", type=int, default=0, help="devices on the model axis (default: all)")
    p.add_argument("--predict-size", type=int, default=8, help="samples whose predictions are compared")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--from-scratch", action="store_true", help="re-initialize the weights (same architecture) before training")
    args = p.parse_args(argv)

    try:
        safe_paths.check_out_dir(args.out, args.model)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    log = Log(os.path.join(args.out, "log.txt"))
    t0 = time.time()

    export = os.path.join(args.out, "keras3-export")
    subprocess.run(["node", os.path.join(HERE, "export_keras3.js"), args.model, export], check=True, cwd=ROOT)
    src_path = os.path.join(args.out, "model.keras")
    meta = keras3_io.pack(export, src_path)
    masks = meta.get("keras3_masks", {})
    if meta.get("task") != "reverse":
        raise SystemExit(f"{args.model}: task {meta.get('task')!r}; this script generates data for 'reverse'")
    try:  # the metadata sizes the generated arrays: bounded before anything is allocated
        safe_paths.check_reverse_meta(meta, masks, [args.train_size, 512, args.predict_size])
    except ValueError as e:
        raise SystemExit(f"{args.model}: {e}") from None

    import jax
    import keras
    import numpy as np

    keras.utils.set_random_seed(args.seed)
    dist, devices, mesh = distribution(args, log)
    keras.distribution.set_distribution(dist)
    log(f"keras {keras.__version__}, backend {keras.backend.backend()}, jax {jax.__version__}")
    log(f"devices ({len(devices)}): {devices}; {mesh['kind']} mesh {mesh['shape']} {mesh['axis_names']}")
    if args.batch_size % mesh["shape"][0]:
        raise SystemExit(f"--batch-size {args.batch_size} must divide over {mesh['shape'][0]} data-parallel devices")

    model = keras3_io.load(src_path)
    if args.from_scratch:
        model = keras.models.clone_model(model)
    log(f"loaded {args.model} in Keras 3: {model.count_params()} parameters, inputs {[i.name for i in model.inputs]}")
    if args.model_parallel:
        for v in model.trainable_variables:
            if "query/kernel" in v.path:
                log(f"{v.path} {tuple(v.shape)} sharding {v.value.sharding.spec}")
                break

    x, y = reverse_data(meta, masks, args.train_size, args.seed)
    names = [i.name for i in model.inputs]
    x_list = [x[n] for n in names]
    # where one training batch goes: each device gets its slice of the batch (DataParallel)
    first = x_list[0][: args.batch_size]
    placed = keras.distribution.distribute_tensor(first, dist.get_data_layout(first.shape))
    batch_shards = [f"{s.device} {tuple(s.data.shape)}" for s in placed.addressable_shards]
    log(f"one batch {tuple(first.shape)} of {names[0]!r} is placed as: {', '.join(batch_shards)}")
    xv, yv = reverse_data(meta, masks, 512, args.seed + 1)
    xv_list = [xv[n] for n in names]
    model.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate),
        loss="sparse_categorical_crossentropy",
        metrics=["sparse_categorical_accuracy"],
    )
    start_loss, start_acc = model.evaluate(xv_list, yv, batch_size=args.batch_size, verbose=0)
    log(f"before training: val loss {start_loss:.4f}, token accuracy {start_acc:.4f}")

    steps = []

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            steps.append({"epoch": epoch + 1, "loss": float(logs["loss"]), "val_loss": float(logs["val_loss"]),
                          "val_accuracy": float(logs["val_sparse_categorical_accuracy"]), "seconds": round(time.time() - t_fit, 2)})
            log(f"epoch {epoch + 1}: loss {logs['loss']:.4f}, val loss {logs['val_loss']:.4f}, "
                f"val token accuracy {logs['val_sparse_categorical_accuracy']:.4f} ({steps[-1]['seconds']} s)")

    t_fit = time.time()
    model.fit(x_list, y, batch_size=args.batch_size, epochs=args.epochs, validation_data=(xv_list, yv), verbose=0, callbacks=[Record()])
    fit_s = time.time() - t_fit
    log(f"trained {args.epochs} epochs x {math.ceil(args.train_size / args.batch_size)} steps in {fit_s:.1f} s")

    trained = os.path.join(args.out, "trained.keras")
    model.save(trained)
    keras3_io.strip_optimizer(trained)
    xp, _ = reverse_data(meta, masks, args.predict_size, args.seed + 2)
    xp_list = [xp[n] for n in names]
    keras_out = np.asarray(model.predict(xp_list, batch_size=args.predict_size, verbose=0))
    io = {"inputs": [tensor_json(v) for v in xp_list], "input_names": names, "outputs": [tensor_json(keras_out)],
          "keras": keras.__version__, "backend": keras.backend.backend()}
    io_path = os.path.join(args.out, "io.json")
    with open(io_path, "w") as f:
        json.dump(io, f)

    tfjs_dir = os.path.join(args.out, "tfjs")
    convert_back(trained, tfjs_dir)
    errors = {b: predict_in_node(tfjs_dir, io_path, b) for b in ("cpu", "wasm")}
    log(f"tfjs-attention on the converted model vs Keras: max abs error {errors}")
    run = {
        "model": os.path.relpath(os.path.abspath(args.model), ROOT), "keras": keras.__version__, "jax": jax.__version__,
        "backend": keras.backend.backend(), "devices": [str(d) for d in devices], "mesh": mesh, "batch_shards": batch_shards,
        "xla_flags": os.environ.get("XLA_FLAGS", ""), "epochs": args.epochs, "train_size": args.train_size,
        "batch_size": args.batch_size, "learning_rate": args.learning_rate, "parameters": int(model.count_params()),
        "start": {"val_loss": float(start_loss), "val_accuracy": float(start_acc)}, "epochs_log": steps,
        "fit_seconds": round(fit_s, 1), "total_seconds": round(time.time() - t0, 1), "max_abs_error": errors,
        "tolerance": args.tolerance,
    }
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump(run, f, indent=1)
    with open(os.path.join(args.out, "loss.csv"), "w") as f:
        f.write("epoch,loss,val_loss,val_accuracy,seconds\n")
        f.write(f"0,,{start_loss},{start_acc},0\n")
        for s in steps:
            f.write(f"{s['epoch']},{s['loss']},{s['val_loss']},{s['val_accuracy']},{s['seconds']}\n")
    worst = max(errors.values())
    if worst > args.tolerance:
        raise SystemExit(f"round trip: max abs error {worst:.3g} > {args.tolerance}")
    log(f"done in {run['total_seconds']} s")
    return run


if __name__ == "__main__":
    main()
