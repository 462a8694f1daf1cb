"""Checks that keep scale/ from reading, packing or deleting what a model file or an argument
names outside its place. Standard library only, so that its tests run with plain python3 + pytest.

- `weights_files(folder, manifest)`: each manifest path must be relative, without `..`, resolve
  (symlinks followed) inside the folder's real path and be a regular file (no FIFO, no /dev/zero);
  no file twice; the files' sizes must add up to exactly the bytes the manifest declares.
- `check_zip_entries(zip)`: every entry name of a .keras archive must be relative, without `..`,
  backslashes or a drive, not repeated, and name a regular file or a folder (no symlink).
- `rewrite_zip(path, edit)`: rewrites an archive from its entries' bytes (never extracted under
  their own names); only `model.weights.h5` goes to disk, under a fixed name, for `edit`.
- `check_out_dir(out, model)`: the output folder of train_distributed.py may be replaced only when
  it is missing, empty, or holds nothing but what that script writes.
- `check_reverse_meta(meta, masks, sizes)`: the metadata that sizes the generated data is bounded.
"""
import os
import stat
import tempfile
import zipfile

# bytes per element of the dtypes tfjs saves
DTYPE_BYTES = {"float32": 4, "int32": 4, "bool": 1}


def _fail(message):
    raise ValueError(message)


def check_relative_name(name, what):
    """Refuses an empty, absolute, drive-qualified, backslashed or `..`-holding name."""
    if not isinstance(name, str) or name == "":
        _fail(f"refusing {what} {name!r}: expected a relative path")
    if "\\" in name or "\0" in name:
        _fail(f"refusing {what} {name!r}: backslashes and NUL are not allowed")
    if name.startswith("/") or os.path.isabs(name) or (len(name) > 1 and name[1] == ":"):
        _fail(f"refusing {what} {name!r}: expected a relative path, received an absolute one")
    if ".." in name.split("/"):
        _fail(f"refusing {what} {name!r}: '..' would leave its folder")


def _inside(root, path):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _shape_elements(shape, name):
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        _fail(f"weight {name!r}: expected its shape to be a list of non-negative integers, received {shape!r}")
    n = 1
    for d in shape:
        n *= d
    return n


def declared_bytes(group):
    """The bytes one weights group's entries declare (dtype x shape)."""
    total = 0
    for spec in group["weights"]:
        if not isinstance(spec, dict) or spec.get("dtype") not in DTYPE_BYTES:
            _fail(f"weight {spec!r}: expected a dtype among {sorted(DTYPE_BYTES)}")
        total += _shape_elements(spec.get("shape"), spec.get("name")) * DTYPE_BYTES[spec["dtype"]]
    return total


def weights_files(folder, manifest):
    """[(group, [real paths], declared bytes)] for a weightsManifest, all checked, nothing read."""
    if not isinstance(manifest, list):
        _fail(f"{folder}/model.json: expected weightsManifest to be a list, received {type(manifest).__name__}")
    root = os.path.realpath(folder)
    seen = set()
    out = []
    for i, group in enumerate(manifest):
        if not isinstance(group, dict) or not isinstance(group.get("paths"), list) or not isinstance(group.get("weights"), list):
            _fail(f"{folder}/model.json: weights group {i}: expected {{paths: [...], weights: [...]}}")
        files = []
        for name in group["paths"]:
            check_relative_name(name, "weights path")
            real = os.path.realpath(os.path.join(root, name))
            if not _inside(root, real):
                _fail(f"refusing weights path {name!r}: it resolves to {real}, outside {root}")
            try:
                st = os.stat(real)
            except OSError as e:
                _fail(f"cannot read weights file {real}: {e.strerror}")
            if not stat.S_ISREG(st.st_mode):
                _fail(f"refusing weights path {name!r}: {real} is not a regular file")
            if real in seen:
                _fail(f"{folder}/model.json lists the weights file {name!r} more than once")
            seen.add(real)
            files.append((real, st.st_size))
        declared = declared_bytes(group)
        held = sum(size for _, size in files)
        if held != declared:
            _fail(f"{folder}/model.json: weights group {i} declares {declared} bytes, but its files hold {held}")
        out.append((group, [f for f, _ in files], declared))
    return out


def read_regular(path, size):
    """Exactly `size` bytes of the regular file `path`, opened without following a final symlink."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            _fail(f"refusing {path}: not a regular file")
        data = b""
        while len(data) < size:
            chunk = os.read(fd, size - len(data))
            if not chunk:
                _fail(f"{path} is shorter than the {size} bytes it had when checked")
            data += chunk
        return data
    finally:
        os.close(fd)


def check_zip_entries(z):
    """The entries of an open ZipFile, each name checked; refuses symlinks and repeated names."""
    infos = z.infolist()
    seen = set()
    for info in infos:
        check_relative_name(info.filename, "archive entry")
        kind = stat.S_IFMT(info.external_attr >> 16)  # 0: no Unix type recorded (a plain file)
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            _fail(f"refusing archive entry {info.filename!r}: not a regular file or a folder")
        key = info.filename.rstrip("/")
        if key in seen:
            _fail(f"refusing archive entry {info.filename!r}: it appears more than once")
        seen.add(key)
    return infos


WEIGHTS_ENTRY = "model.weights.h5"


def rewrite_zip(path, edit):
    """Rewrites the archive at `path`, passing `edit` the path of a copy of its model.weights.h5."""
    folder = os.path.dirname(os.path.abspath(path))
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(path) as z:
            infos = check_zip_entries(z)
            if WEIGHTS_ENTRY not in [i.filename for i in infos]:
                _fail(f"{path}: no {WEIGHTS_ENTRY} entry; expected a .keras file")
            weights = os.path.join(tmp, "weights.h5")
            with open(weights, "wb") as f:
                f.write(z.read(WEIGHTS_ENTRY))
            edit(weights)
            fd, new = tempfile.mkstemp(dir=folder, suffix=".keras.tmp")
            os.close(fd)
            try:
                with zipfile.ZipFile(new, "w", zipfile.ZIP_DEFLATED) as out:
                    for info in infos:
                        if info.filename == WEIGHTS_ENTRY:
                            with open(weights, "rb") as f:
                                out.writestr(info, f.read())
                        else:
                            out.writestr(info, z.read(info))
                os.replace(new, path)
            except BaseException:
                os.unlink(new)
                raise


# what train_distributed.py writes into --out
RUN_OUTPUTS = {"run.json", "loss.csv", "log.txt", "model.keras", "trained.keras", "tfjs", "io.json", "keras3-export"}


def check_out_dir(out, model=None):
    """Refuses an --out that must not be replaced: the model folder or one holding it, a link, a
    file, or a folder holding anything train_distributed.py does not write."""
    if not out:
        _fail("--out: expected a folder path")
    real = os.path.realpath(out)
    if model is not None and _inside(real, os.path.realpath(model)):
        _fail(f"--out {out}: it holds the input model {model}; expected a separate output folder")
    if os.path.islink(out):
        _fail(f"--out {out}: it is a symlink; expected a folder path")
    if not os.path.lexists(out):
        return
    if not os.path.isdir(out):
        _fail(f"--out {out}: it is a file; expected a folder this script may replace")
    other = sorted(set(os.listdir(out)) - RUN_OUTPUTS)
    if other:
        _fail(
            f"--out {out}: refusing to replace a folder that holds files this script does not write "
            f"({', '.join(other[:5])}{', ...' if len(other) > 5 else ''}); expected a missing or empty folder, or an earlier run's"
        )


# bounds of the `reverse` task's metadata (the committed model: vocab 12, maxLen 10)
MAX_VOCAB = 2**31 - 1
MAX_LEN = 4096
MAX_ELEMENTS = 2**28


def _int(meta, key, low, high):
    v = meta.get(key) if isinstance(meta, dict) else None
    if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
        _fail(f"model metadata {key}: expected an integer in [{low}, {high}], received {v!r}")
    return v


def check_reverse_meta(meta, masks, sizes):
    """Bounds what sizes the generated arrays: vocabSize, maxLen, minLen, padId, the mask shapes,
    and sizes (the sample counts) x maxLen x the masks' elements, before anything is allocated."""
    vocab = _int(meta, "vocabSize", 2, MAX_VOCAB)
    max_len = _int(meta, "maxLen", 1, MAX_LEN)
    _int(meta, "minLen", 1, max_len)
    _int(meta, "padId", 0, vocab - 1)
    if not isinstance(masks, dict):
        _fail(f"model metadata keras3_masks: expected an object, received {masks!r}")
    per_sample = 2 * max_len
    for name, m in masks.items():
        shape = m.get("shape") if isinstance(m, dict) else None
        if not isinstance(m, dict) or not isinstance(m.get("input"), str) or not isinstance(shape, list) or len(shape) != 3:
            _fail(f"model metadata keras3_masks[{name!r}]: expected {{input: name, shape: [batch, queries, keys]}}, received {m!r}")
        for d in shape[1:]:
            if not isinstance(d, int) or isinstance(d, bool) or not 1 <= d <= MAX_LEN:
                _fail(f"model metadata keras3_masks[{name!r}].shape: expected queries and keys in [1, {MAX_LEN}], received {shape!r}")
        per_sample += shape[1] * shape[2]
    for n in sizes:
        if not isinstance(n, int) or n < 1 or n * per_sample > MAX_ELEMENTS:
            _fail(f"{n} samples of {per_sample} values each exceed {MAX_ELEMENTS} values; use fewer samples")
