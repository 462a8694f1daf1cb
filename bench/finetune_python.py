"""LoRA fine-tuning speed in Python at GPT-2 small's shape: keras-hub against PyTorch + peft.

The Python half of the fine-tuning benchmark: milliseconds per training step of LoRA fine-tuning
of GPT-2 small (12 layers, width 768, 12 heads, vocab 50257), rank 8 on the attention query and
value projections, one fixed batch of 4 x 128 tokens, ONE CPU thread, the same weights and the same
batch for every contender (and for the JavaScript side, which loads the same keras-hub preset with
`loadKerasHubPreset` and the same batch.json).

  /work/venv-torch/bin/python bench/finetune_python.py prepare
  /work/venv-torch/bin/python bench/finetune_python.py keras --steps 5
  /work/venv-torch/bin/python bench/finetune_python.py torch --steps 5 [--targets qv|c_attn] [--attn sdpa|eager]

`keras` and `torch` each print ONE JSON line on stdout when they finish (everything else goes to
stderr), for a driver that runs them as child processes:

  {"contender", "ms_per_step": [the timed steps, after 2 warm-up steps], "median_ms",
   "peak_rss_bytes" (getrusage ru_maxrss * 1024: the whole process, loading included),
   "loss_first" (the loss of the very first step, warm-up included: the untrained model's, so it
   should agree between contenders), "loss_last", "trainable_params", "trainable_breakdown",
   "frozen_params", "versions", "threads", "notes"}

--steps N is the number of timed steps; 2 warm-up steps run before them (the first one traces /
builds; neither is timed). --warmup W changes the 2.

Files (under bench/.models/gpt2-small/, ignored by git):

  hf/                       the source: GPT-2 small with random weights in Hugging Face format
                            (fixtures/gpt2_bench.py; torch seed 0, final norm scaled by 8).
  finetune/keras_preset/    `prepare`: keras-hub 0.32's `GPT2Backbone.from_preset(hf/, dropout=0.0)`
                            (keras-hub converts HF GPT-2 folders itself), wrapped as
                            `GPT2CausalLM(backbone, preprocessor=None)` and written by
                            `save_to_preset`: config.json, task.json, model.weights.h5, metadata.json.
                            No tokenizer: the HF folder has no vocab / merges, the batch is token ids,
                            and both keras-hub (`from_preset(..., preprocessor=None)`) and
                            `loadKerasHubPreset` (tokenizer null) load a preset without one, as for
                            the presets of fixtures/family_bench.py. dropout 0.0 is in the saved config.
  finetune/batch.json       `prepare`: {"token_ids" [4][128], "padding_mask" [4][128] (0/1),
                            "y" [4][128], "sample_weight" [4][128] (0/1), "lengths", "seed",
                            "pad_id"}. token ids uniform in [0, 50256) from numpy
                            default_rng(seed 128); row lengths 128, 128, 100, 64, the rest of a row
                            padded with 50256 (GPT-2's end / pad token, as keras-hub's packer pads);
                            y = token_ids shifted left by one (last column: the pad id), sample_weight
                            = padding_mask shifted left by one (last column 0): what keras-hub's
                            CausalLMPreprocessor makes of a 129-token window.
  finetune/prepare.json     what `prepare` checked: the preset's logits against the HF model's are
                            not computed here (torch and keras-hub cannot share a process, see
                            below); instead both contenders report loss_first, the loss of the
                            untrained model on the batch, which must agree to ~1e-5.

Contenders

  keras: keras-hub 0.32, Keras 3.15, TensorFlow 2.21 backend, CPU. `GPT2CausalLM.from_preset(
    keras_preset, preprocessor=None)`, `backbone.enable_lora(8)` (keras-hub's default targets, the
    layers named `query` and `value`: every attention's query / value EinsumDense; alpha = rank, so
    the LoRA scale is 1), then `task.compile()` with CausalLM.compile's defaults: Adam(2e-5) (Keras:
    beta 0.9 / 0.999, epsilon 1e-7), SparseCategoricalCrossentropy(from_logits=True), weighted
    metric SparseCategoricalAccuracy (it runs every step: part of the default), jit_compile "auto",
    which Keras resolves to False on a CPU-only machine (a tf.function graph, no XLA). A step is
    `task.train_on_batch(x, y, sample_weight=sw, return_dict=True)` with x = {"token_ids",
    "padding_mask"}. Loss: Keras' "sum_over_batch_size" reduction with sample weights =
    sum(ce * sw) / (4 * 128). keras-hub's EinsumDense LoRA on a [768, 12, 64] kernel: A
    [768, 12, 8] (he_uniform) and B [8, 64] (zeros), kernel + A @ B recomputed each step; the
    targets' biases [12, 64] stay trainable (enable_lora freezes every layer, then makes the
    target layers trainable and freezes only their kernels). Trainable per layer: 2 x (73,728 +
    512 + 768) = 150,016; x 12 = 1,800,192.

  torch: PyTorch + peft. transformers' `GPT2LMHeadModel.from_pretrained(hf/)` with resid / embd /
    attn dropout 0, attn_implementation "sdpa" (transformers' default; --attn eager for the plain
    one), `peft.get_peft_model` with `LoraConfig(r=8, lora_alpha=8, lora_dropout=0.0,
    bias="lora_only")`, `torch.optim.Adam(lr=2e-5, eps=1e-7)` (Keras' epsilon), loss
    sum(cross_entropy(logits, y) * sw) / (4 * 128) (the same reduction as Keras). A step is
    zero_grad(set_to_none) + forward + loss + backward + optimizer.step (+ loss.item()).
    HF GPT-2 packs q, k and v in one Conv1D, `c_attn` [768 -> 2304], so peft's usual recipe
    (target_modules=["c_attn"]) adapts k as well, with one A [8, 768] and B [2304, 8] per layer.
    --targets qv (the default) restricts LoRA honestly to q and v: before peft runs, each c_attn is
    replaced by a module holding three nn.Linear(768, 768) named q_proj / k_proj / v_proj whose
    weights and biases are the exact slices of c_attn's (the output is torch.cat of the three, the
    same numbers GPT2Attention splits), and LoraConfig(target_modules=["q_proj", "v_proj"]). With
    bias="lora_only" the q and v biases are trainable, as keras-hub's are. Trainable per layer:
    2 x (8 x 768 + 768 x 8 + 768) = 26,112; x 12 = 313,344. --targets c_attn: peft's usual
    recipe (q, k, v adapted; c_attn's whole bias [2304] trainable): 12 x (6,144 + 18,432 + 2,304) =
    322,560. Both are standard LoRA (x @ A^T @ B^T added to the frozen layer's output, scale
    alpha / r = 1); neither is keras-hub's per-head A, which is why keras-hub has ~5.7x as many
    trainable parameters at the same rank. The extra work is small either way next to the frozen
    model's forward and backward (logits [4, 128, 50257] and the tied 50257 x 768 embedding dominate).

One thread: OMP_NUM_THREADS, MKL_NUM_THREADS, TF_NUM_INTRAOP_THREADS, TF_NUM_INTEROP_THREADS = 1 in
the environment before any import, then torch.set_num_threads(1) / set_num_interop_threads(1), or
tf.config.threading.set_intra_op_parallelism_threads(1) / set_inter_op_parallelism_threads(1)
before TensorFlow's context starts (the JSON's "threads" says what the libraries report).
CUDA_VISIBLE_DEVICES is emptied: CPU only. torch and keras-hub each run in their own process
(transformers imported after keras aborts with "LLVM ERROR: inconsistency in registered
CommandLine options"), and `prepare` imports no torch.

Measured with /work/venv-torch (Python 3.11): torch 2.15.0, transformers 4.57.6, peft 0.22.0
(`pip install peft`, pulled nothing else), tensorflow 2.21.0, keras 3.15.1, keras-hub 0.32.0,
numpy 2.4.6. The machine these were written on has 2 shared cores: read the per-step list and
compare contenders run interleaved, not single medians.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

for _name in ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"]:
    os.environ[_name] = "1"
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ["USE_TF"] = "0"  # transformers: torch only
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["CUDA_VISIBLE_DEVICES"] = ""

import numpy as np  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MODEL_DIR = os.path.join(ROOT, "bench", ".models", "gpt2-small")
HF_DIR = os.path.join(MODEL_DIR, "hf")
OUT_DIR = os.path.join(MODEL_DIR, "finetune")
PRESET_DIR = os.path.join(OUT_DIR, "keras_preset")
BATCH_PATH = os.path.join(OUT_DIR, "batch.json")

RANK = 8
ALPHA = 8
LEARNING_RATE = 2e-5
ADAM_EPSILON = 1e-7  # Keras' Adam default; torch's is 1e-8
BATCH = 4
SEQUENCE = 128
LENGTHS = [128, 128, 100, 64]
VOCAB = 50257
PAD_ID = 50256
BATCH_SEED = 128


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def peak_rss_bytes():
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def load_batch():
    if not os.path.exists(BATCH_PATH):
        sys.exit(f"{BATCH_PATH} is missing: run `python bench/finetune_python.py prepare` first")
    with open(BATCH_PATH) as f:
        batch = json.load(f)
    return {
        "token_ids": np.asarray(batch["token_ids"], "int32"),
        "padding_mask": np.asarray(batch["padding_mask"], "int32"),
        "y": np.asarray(batch["y"], "int32"),
        "sample_weight": np.asarray(batch["sample_weight"], "float32"),
    }


def make_batch():
    rng = np.random.default_rng(BATCH_SEED)
    ids = rng.integers(0, VOCAB - 1, size=(BATCH, SEQUENCE)).astype("int64")
    mask = np.zeros((BATCH, SEQUENCE), "int64")
    for row, length in enumerate(LENGTHS):
        mask[row, :length] = 1
        ids[row, length:] = PAD_ID
    y = np.full_like(ids, PAD_ID)
    y[:, :-1] = ids[:, 1:]
    sw = np.zeros_like(mask)
    sw[:, :-1] = mask[:, 1:]
    return {
        "token_ids": ids.tolist(),
        "padding_mask": mask.tolist(),
        "y": y.tolist(),
        "sample_weight": sw.tolist(),
        "lengths": LENGTHS,
        "seed": BATCH_SEED,
        "pad_id": PAD_ID,
        "note": "token ids uniform in [0, 50256) from numpy default_rng(seed); padded with pad_id after each row's "
        "length; y = token_ids shifted left by one (last column pad_id), sample_weight = padding_mask shifted "
        "left by one (last column 0)",
    }


def timed_steps(step, steps, warmup):
    """Runs warmup + steps calls of step() -> loss; returns (ms of the timed ones, losses of all)."""
    times, losses = [], []
    for i in range(warmup + steps):
        start = time.perf_counter()
        loss = step()
        elapsed = (time.perf_counter() - start) * 1000.0
        losses.append(loss)
        label = "warm-up" if i < warmup else "step"
        log(f"{label} {i + 1}: {elapsed:.1f} ms, loss {loss:.6f}")
        if i >= warmup:
            times.append(elapsed)
    return times, losses


def result(contender, times, losses, trainable, breakdown, frozen, versions, threads, notes):
    return {
        "contender": contender,
        "ms_per_step": [round(t, 3) for t in times],
        "median_ms": round(statistics.median(times), 3) if times else None,
        "peak_rss_bytes": peak_rss_bytes(),
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "trainable_params": trainable,
        "trainable_breakdown": breakdown,
        "frozen_params": frozen,
        "versions": versions,
        "threads": threads,
        "notes": notes,
    }


# ---------------------------------------------------------------------------------------------
# keras-hub


def tensorflow_one_thread():
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    return tf


def prepare():
    os.makedirs(OUT_DIR, exist_ok=True)
    batch = make_batch()
    with open(BATCH_PATH, "w") as f:
        json.dump(batch, f)
    log(f"wrote {BATCH_PATH}")

    tf = tensorflow_one_thread()
    import keras
    import keras_hub
    import shutil

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.GPT2Backbone.from_preset(HF_DIR, dropout=0.0)
    task = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    shutil.rmtree(PRESET_DIR, ignore_errors=True)
    task.save_to_preset(PRESET_DIR)
    log(f"wrote {PRESET_DIR}: {sorted(os.listdir(PRESET_DIR))}")

    # The saved preset must give back the model that was saved.
    x = {"token_ids": np.asarray(batch["token_ids"], "int32"), "padding_mask": np.asarray(batch["padding_mask"], "int32")}
    before = np.asarray(task.predict(x, verbose=0))
    reloaded = keras_hub.models.GPT2CausalLM.from_preset(PRESET_DIR, preprocessor=None)
    after = np.asarray(reloaded.predict(x, verbose=0))
    diff = float(np.max(np.abs(before - after)))
    info = {
        "source": "bench/.models/gpt2-small/hf (GPT2Backbone.from_preset, dropout=0.0)",
        "preset_files": sorted(os.listdir(PRESET_DIR)),
        "reloaded_vs_saved_max_abs_logits": diff,
        "backbone_params": int(backbone.count_params()),
        "versions": {"tensorflow": tf.__version__, "keras": keras.__version__, "keras_hub": keras_hub.__version__},
    }
    with open(os.path.join(OUT_DIR, "prepare.json"), "w") as f:
        json.dump(info, f, indent=1)
    log(json.dumps(info))
    assert diff == 0.0, "the reloaded preset must reproduce the saved model"


def run_keras(steps, warmup):
    tf = tensorflow_one_thread()
    import keras
    import keras_hub

    if not os.path.isdir(PRESET_DIR):
        sys.exit(f"{PRESET_DIR} is missing: run `python bench/finetune_python.py prepare` first")
    keras.utils.set_random_seed(0)
    batch = load_batch()
    task = keras_hub.models.GPT2CausalLM.from_preset(PRESET_DIR, preprocessor=None)
    backbone = task.backbone
    assert backbone.dropout == 0.0, backbone.dropout
    backbone.enable_lora(RANK)
    task.compile()  # CausalLM.compile's defaults, after enable_lora changed what is trainable
    assert not task.jit_compile, "expected no XLA on a CPU-only machine"

    breakdown = {}
    for v in task.trainable_variables:
        kind = v.path.split("/")[-1]
        breakdown[kind] = breakdown.get(kind, 0) + int(np.prod(v.shape))
    shapes = sorted({(v.path.split("/")[-1], tuple(v.shape)) for v in task.trainable_variables})
    trainable = int(sum(np.prod(v.shape) for v in task.trainable_variables))
    frozen = int(sum(np.prod(v.shape) for v in task.non_trainable_variables))
    lora_layers = [layer.path for layer in backbone._flatten_layers() if getattr(layer, "lora_enabled", False)]
    log(f"LoRA on {len(lora_layers)} layers, e.g. {lora_layers[:2]}; trainable {trainable} {breakdown}; shapes {shapes}")

    x = {"token_ids": batch["token_ids"], "padding_mask": batch["padding_mask"]}
    y, sw = batch["y"], batch["sample_weight"]

    def step():
        logs = task.train_on_batch(x, y, sample_weight=sw, return_dict=True)
        return float(logs["loss"])

    times, losses = timed_steps(step, steps, warmup)
    versions = {"python": sys.version.split()[0], "tensorflow": tf.__version__, "keras": keras.__version__, "keras_hub": keras_hub.__version__, "numpy": np.__version__}
    threads = {
        "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
    }
    notes = (
        f"keras-hub GPT2CausalLM from {os.path.relpath(PRESET_DIR, ROOT)}, backbone.enable_lora({RANK}) on "
        f"{len(lora_layers)} layers (query/value EinsumDense; A {shapes_of(shapes, 'lora_kernel_a')}, B "
        f"{shapes_of(shapes, 'lora_kernel_b')}, alpha = rank; the targets' biases trainable), compile() defaults: "
        "Adam(2e-5, eps 1e-7), SparseCategoricalCrossentropy(from_logits) sum_over_batch_size with sample_weight, "
        "weighted SparseCategoricalAccuracy; no XLA (jit_compile auto = False on CPU); dropout 0; "
        f"train_on_batch on one fixed batch {BATCH}x{SEQUENCE}; {warmup} warm-up steps not timed; one thread"
    )
    return result("keras-hub", times, losses, trainable, breakdown, frozen, versions, threads, notes)


def shapes_of(shapes, kind):
    return [list(shape) for name, shape in shapes if name == kind]


# ---------------------------------------------------------------------------------------------
# PyTorch + peft


def split_qkv(model):
    """Replaces every GPT2Attention.c_attn (Conv1D 768 -> 2304, packed q | k | v) by three
    nn.Linear(768, 768) holding the exact slices of its weight and bias, so that LoRA can target q
    and v alone. GPT2Attention splits c_attn's output in three along the last axis: cat keeps that."""
    import torch
    from torch import nn

    class SplitQKV(nn.Module):
        def __init__(self, conv, width):
            super().__init__()
            self.q_proj = nn.Linear(width, width)
            self.k_proj = nn.Linear(width, width)
            self.v_proj = nn.Linear(width, width)
            with torch.no_grad():
                # Conv1D's weight is [in, out]: y = x @ W + b; nn.Linear's is [out, in].
                for i, proj in enumerate([self.q_proj, self.k_proj, self.v_proj]):
                    proj.weight.copy_(conv.weight[:, i * width : (i + 1) * width].t())
                    proj.bias.copy_(conv.bias[i * width : (i + 1) * width])

        def forward(self, x):
            return torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1)

    width = model.config.n_embd
    for block in model.transformer.h:
        block.attn.c_attn = SplitQKV(block.attn.c_attn, width)


def lora_kind(name):
    """peft's parameter names: '....q_proj.lora_A.default.weight' -> 'lora_A', '....q_proj.base_layer.bias' -> 'bias'."""
    parts = name.split(".")
    return next((part for part in parts if part.startswith("lora_")), parts[-1])


def run_torch(steps, warmup, targets, attn):
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    import peft
    import transformers
    import torch.nn.functional as F

    torch.manual_seed(0)
    batch = load_batch()
    model = transformers.GPT2LMHeadModel.from_pretrained(
        HF_DIR, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation=attn, dtype=torch.float32
    )
    ids = torch.from_numpy(batch["token_ids"].astype("int64"))
    mask = torch.from_numpy(batch["padding_mask"].astype("int64"))
    y = torch.from_numpy(batch["y"].astype("int64"))
    sw = torch.from_numpy(batch["sample_weight"])

    if targets == "qv":
        with torch.no_grad():
            reference = model(input_ids=ids, attention_mask=mask).logits
        split_qkv(model)
        with torch.no_grad():
            split = model(input_ids=ids, attention_mask=mask).logits
        split_diff = float((reference - split).abs().max())
        log(f"c_attn split into q_proj / k_proj / v_proj: max |logits| difference {split_diff:.2e}")
        assert split_diff < 1e-3, split_diff
        del reference, split
        target_modules = ["q_proj", "v_proj"]
    else:
        split_diff = None
        target_modules = ["c_attn"]
    config = peft.LoraConfig(
        r=RANK,
        lora_alpha=ALPHA,
        lora_dropout=0.0,
        target_modules=target_modules,
        bias="lora_only",
        fan_in_fan_out=targets == "c_attn",  # HF Conv1D stores [in, out]
    )
    model = peft.get_peft_model(model, config)
    model.train()

    breakdown = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            kind = lora_kind(name)
            breakdown[kind] = breakdown.get(kind, 0) + p.numel()
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    shapes = sorted({(lora_kind(name), tuple(p.shape)) for name, p in model.named_parameters() if p.requires_grad and "lora_" in name})
    log(f"peft targets {target_modules}; trainable {trainable} {breakdown}; LoRA shapes {shapes}")

    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=LEARNING_RATE, eps=ADAM_EPSILON)
    denominator = float(sw.numel())

    def step():
        optimizer.zero_grad(set_to_none=True)
        logits = model(input_ids=ids, attention_mask=mask).logits
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        loss = (ce * sw.reshape(-1)).sum() / denominator
        loss.backward()
        optimizer.step()
        return float(loss.item())

    times, losses = timed_steps(step, steps, warmup)
    versions = {"python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__, "numpy": np.__version__}
    threads = {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}
    if targets == "qv":
        how = (
            "LoRA on q and v only: each c_attn Conv1D (packed q|k|v) replaced by exact nn.Linear slices q_proj/k_proj/v_proj "
            f"(max |logits| change {split_diff:.1e}), LoraConfig(target_modules=['q_proj','v_proj'])"
        )
    else:
        how = "LoRA on c_attn (peft's usual GPT-2 recipe): adapts q, k and v together (one A [8,768], B [2304,8] per layer)"
    notes = (
        f"transformers GPT2LMHeadModel from {os.path.relpath(HF_DIR, ROOT)}, attn_implementation {attn}, dropout 0; "
        f"peft LoraConfig(r={RANK}, lora_alpha={ALPHA}, lora_dropout=0, bias='lora_only'); {how}; standard LoRA shapes "
        f"{[[n, list(s)] for n, s in shapes]}, unlike keras-hub's per-head A [768,12,8]; Adam(lr 2e-5, eps 1e-7); loss "
        f"sum(ce * sample_weight) / (4*128) as Keras' sum_over_batch_size; no accuracy metric; one fixed batch "
        f"{BATCH}x{SEQUENCE}; {warmup} warm-up steps not timed; one thread"
    )
    return result(f"pytorch+peft ({'q,v' if targets == 'qv' else 'c_attn'})", times, losses, trainable, breakdown, frozen, versions, threads, notes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["prepare", "keras", "torch"])
    parser.add_argument("--steps", type=int, default=5, help="timed steps (after the warm-up ones)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--targets", choices=["qv", "c_attn"], default="qv", help="torch: LoRA on q and v only (default) or on the packed c_attn")
    parser.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa", help="torch: transformers' attention implementation")
    args = parser.parse_args()
    if args.mode == "prepare":
        prepare()
        return
    if args.mode == "keras":
        out = run_keras(args.steps, args.warmup)
    else:
        out = run_torch(args.steps, args.warmup, args.targets, args.attn)
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
