"""What a model folder, a .keras archive or an argument can make scale/ read, pack or delete: only
what belongs there. Standard library + pytest only (no numpy, keras or h5py needed):

    python3 -m pytest scale/test_safe_paths.py
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import types
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import keras3_io  # noqa: E402
import safe_paths  # noqa: E402
import train_distributed  # noqa: E402

def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


# one float32 weight of shape [2]: 8 bytes
WEIGHTS = [{"name": "dense/kernel", "dtype": "float32", "shape": [2]}]


def export_folder(tmp_path, paths, name="export"):
    """A Keras 3 export folder (model.json of format keras3-config) listing `paths`."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"\0" * 8)
    manifest = [{"paths": paths, "weights": WEIGHTS}]
    (folder / "model.json").write_text(json.dumps({"format": "keras3-config", "modelTopology": {}, "weightsManifest": manifest}))
    return folder


@pytest.mark.parametrize(
    "bad, message",
    [
        ("/etc/passwd", "expected a relative path, received an absolute one"),
        ("../weights.bin", "'..' would leave its folder"),
        ("sub/../../weights.bin", "'..' would leave its folder"),
        ("..\\weights.bin", "backslashes"),
        ("", "expected a relative path"),
    ],
)
def test_read_folder_refuses_manifest_paths_that_leave_the_folder(tmp_path, bad, message):
    (tmp_path / "weights.bin").write_bytes(b"\0" * 8)  # what ../weights.bin would reach
    folder = export_folder(tmp_path, [bad])
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("\\", r"\\")):
        keras3_io.read_folder(str(folder))


def test_read_folder_refuses_links_out_and_to_devices_without_reading(tmp_path):
    outside = tmp_path / "secret.bin"
    outside.write_bytes(b"\1" * 8)  # the right size: only the link check stops it
    folder = export_folder(tmp_path, ["out.bin"])
    os.symlink(outside, folder / "out.bin")
    with pytest.raises(ValueError, match="outside"):
        keras3_io.read_folder(str(folder))
    os.mkdir(tmp_path / "elsewhere")
    (tmp_path / "elsewhere" / "w.bin").write_bytes(b"\1" * 8)
    os.symlink(tmp_path / "elsewhere", folder / "linked")
    folder_json = json.loads((folder / "model.json").read_text())
    folder_json["weightsManifest"][0]["paths"] = ["linked/w.bin"]
    (folder / "model.json").write_text(json.dumps(folder_json))
    with pytest.raises(ValueError, match="outside"):
        keras3_io.read_folder(str(folder))
    # /dev/zero, a link to it, and a FIFO in the folder: refused without reading, checked in a
    # child process with a time and memory limit (reading any of them would never end)
    os.symlink("/dev/zero", folder / "zero.bin")
    os.mkfifo(folder / "fifo.bin")
    for name, message in [
        ("/dev/zero", "expected a relative path, received an absolute one"),
        ("zero.bin", "resolves to /dev/zero, outside"),
        ("fifo.bin", "fifo.bin is not a regular file"),
    ]:
        folder_json["weightsManifest"][0]["paths"] = [name]
        (folder / "model.json").write_text(json.dumps(folder_json))
        code = f"import sys; sys.path.insert(0, {HERE!r}); import keras3_io; keras3_io.read_folder({str(folder)!r})"
        start = time.time()
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=10, preexec_fn=limit_memory)
        assert time.time() - start < 10
        assert child.returncode != 0
        assert message in child.stderr


def test_read_folder_refuses_size_mismatches_and_repeats_before_reading(tmp_path):
    folder = export_folder(tmp_path, ["weights.bin"])
    (folder / "weights.bin").write_bytes(b"\0" * 9)
    with pytest.raises(ValueError, match="declares 8 bytes, but its files hold 9"):
        keras3_io.read_folder(str(folder))
    (folder / "weights.bin").write_bytes(b"\0" * 4)
    (folder / "copy.bin").write_bytes(b"\0" * 4)
    os.link(folder / "weights.bin", folder / "again.bin")  # another name, same file: one file
    j = json.loads((folder / "model.json").read_text())
    j["weightsManifest"][0]["paths"] = ["weights.bin", "./weights.bin"]
    (folder / "model.json").write_text(json.dumps(j))
    with pytest.raises(ValueError, match="more than once"):
        keras3_io.read_folder(str(folder))
    j["weightsManifest"][0]["weights"][0]["shape"] = [10**12]
    (folder / "model.json").write_text(json.dumps(j))
    with pytest.raises(ValueError, match="declares 4000000000000 bytes"):
        safe_paths.weights_files(str(folder), [{"paths": ["weights.bin"], "weights": j["weightsManifest"][0]["weights"]}])


def test_weights_files_accepts_a_folder_saved_by_the_package_and_links_inside(tmp_path):
    folder = export_folder(tmp_path, ["weights.bin"])
    [(_, files, size)] = safe_paths.weights_files(str(folder), [{"paths": ["weights.bin"], "weights": WEIGHTS}])
    assert files == [os.path.realpath(folder / "weights.bin")] and size == 8
    (folder / "sub").mkdir()
    os.symlink("../weights.bin", folder / "sub" / "inside.bin")  # a link that stays inside
    [(_, files, _)] = safe_paths.weights_files(str(folder), [{"paths": ["sub/inside.bin"], "weights": WEIGHTS}])
    assert files == [os.path.realpath(folder / "weights.bin")]
    assert safe_paths.read_regular(files[0], 8) == b"\0" * 8
    # the committed Keras 3 export of the package passes the same checks
    d = os.path.join(ROOT, "__tests__", "fixtures", "tfjs_to_keras3", "multi_head_attention_valid_lens")
    model_json = keras3_io.read_model_json(d)
    assert [len(f) for _, f, _ in safe_paths.weights_files(d, model_json["weightsManifest"])] == [1]


def keras_archive(path, extra=()):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", "{}")
        z.writestr("metadata.json", "{}")
        z.writestr("model.weights.h5", b"weights")
        for name, data in extra:
            z.writestr(name, data)


@pytest.fixture
def fake_h5py(monkeypatch):
    """h5py as strip_optimizer uses it: File(path, "a") holding an "optimizer" group; records
    the paths it was opened on and whether the group was deleted."""
    opened = []

    class File(dict):
        def __init__(self, path, mode):
            super().__init__(optimizer=True)
            opened.append(path)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            with open(opened[-1], "ab") as f:
                f.write(b"" if "optimizer" in self else b"-stripped")

    monkeypatch.setitem(sys.modules, "h5py", types.SimpleNamespace(File=File))
    return opened


@pytest.mark.parametrize("bad", ["../../x", "/etc/hostname", "a/../../x", "C:/x"])
def test_strip_optimizer_refuses_entries_outside_the_archive(tmp_path, fake_h5py, bad):
    host = "/etc/hostname"
    path = tmp_path / "trained.keras"
    keras_archive(path, [(bad, b"not the host file")])
    before = path.read_bytes()
    with pytest.raises(ValueError, match="refusing archive entry"):
        keras3_io.strip_optimizer(str(path))
    assert path.read_bytes() == before  # untouched, no host file copied in
    if os.path.exists(host):
        with zipfile.ZipFile(path) as z:
            assert all(z.read(n) != open(host, "rb").read() for n in z.namelist())
    assert sorted(os.listdir(tmp_path)) == ["trained.keras"]


def test_strip_optimizer_refuses_symlink_entries_and_repeated_names(tmp_path, fake_h5py):
    path = tmp_path / "trained.keras"
    keras_archive(path)
    with zipfile.ZipFile(path, "a") as z:
        info = zipfile.ZipInfo("assets/link")
        info.external_attr = (0o120777 << 16)  # a symlink entry
        z.writestr(info, "/etc/passwd")
    with pytest.raises(ValueError, match="not a regular file or a folder"):
        keras3_io.strip_optimizer(str(path))
    with pytest.warns(UserWarning, match="Duplicate name"):
        keras_archive(path, [("config.json", "{}")])
    with pytest.raises(ValueError, match="more than once"):
        keras3_io.strip_optimizer(str(path))


def test_strip_optimizer_rewrites_from_the_entries_bytes(tmp_path, fake_h5py):
    path = tmp_path / "trained.keras"
    keras_archive(path, [("assets/", b""), ("assets/vocab.txt", b"a\nb\n")])
    keras3_io.strip_optimizer(str(path))
    with zipfile.ZipFile(path) as z:
        assert z.namelist() == ["config.json", "metadata.json", "model.weights.h5", "assets/", "assets/vocab.txt"]
        assert z.read("model.weights.h5") == b"weights-stripped"
        assert z.read("assets/vocab.txt") == b"a\nb\n"
    # the weights went to disk under a fixed name, never under an entry's name
    assert [os.path.basename(p) for p in fake_h5py] == ["weights.h5"]
    assert sorted(os.listdir(tmp_path)) == ["trained.keras"]


def test_train_distributed_refuses_to_delete_an_out_folder_it_did_not_write(tmp_path):
    # on copies: a regression here must not delete the repository's own folders
    repo = tmp_path / "repo"
    shutil.copytree(os.path.join(ROOT, "models", "reverse"), repo / "models" / "reverse")
    model = str(repo / "models" / "reverse")
    victim = tmp_path / "precious"
    victim.mkdir()
    (victim / "thesis.tex").write_text("keep me")
    for out, message in [
        (str(victim), "holds files this script does not write \\(thesis.tex\\)"),
        (str(repo), "holds the input model"),
        (model, "holds the input model"),
        (os.path.dirname(model), "holds the input model"),
    ]:
        with pytest.raises(SystemExit, match=message):
            train_distributed.main(["--model", model, "--out", out])
    assert (victim / "thesis.tex").read_text() == "keep me"
    assert os.path.exists(os.path.join(model, "model.json"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="it is a file"):
        safe_paths.check_out_dir(str(tmp_path / "file"), model)
    os.symlink(victim, tmp_path / "link")
    with pytest.raises(ValueError, match="symlink"):
        safe_paths.check_out_dir(str(tmp_path / "link"), model)
    # what may be replaced: nothing there, an empty folder, an earlier run's output
    safe_paths.check_out_dir(str(tmp_path / "new"), model)
    (tmp_path / "empty").mkdir()
    safe_paths.check_out_dir(str(tmp_path / "empty"), model)
    run = tmp_path / "run"
    (run / "tfjs").mkdir(parents=True)
    for name in ["run.json", "log.txt", "loss.csv", "io.json", "model.keras", "trained.keras"]:
        (run / name).write_text("")
    safe_paths.check_out_dir(str(run), model)


def test_reverse_metadata_is_bounded_before_arrays_are_made():
    with open(os.path.join(ROOT, "models", "reverse", "model.json")) as f:
        meta = json.load(f)["userDefinedMetadata"]
    masks = {"lengths": {"input": "lengths_mask", "shape": [None, 10, 10]}}
    safe_paths.check_reverse_meta(meta, masks, [4096, 512, 8])  # the committed model's run
    for change, message in [
        ({"maxLen": 10**9}, "maxLen: expected an integer in \\[1, 4096\\]"),
        ({"vocabSize": 10**12}, "vocabSize"),
        ({"vocabSize": True}, "vocabSize"),
        ({"minLen": 0}, "minLen"),
        ({"minLen": 11}, "minLen"),
        ({"padId": -1}, "padId"),
        ({"maxLen": "10"}, "maxLen"),
    ]:
        with pytest.raises(ValueError, match=message):
            safe_paths.check_reverse_meta({**meta, **change}, masks, [8])
    with pytest.raises(ValueError, match="queries and keys"):
        safe_paths.check_reverse_meta(meta, {"l": {"input": "m", "shape": [None, 10**6, 10**6]}}, [8])
    with pytest.raises(ValueError, match="expected \\{input"):
        safe_paths.check_reverse_meta(meta, {"l": {"shape": [None, 10, 10]}}, [8])
    with pytest.raises(ValueError, match="exceed"):
        safe_paths.check_reverse_meta({**meta, "maxLen": 4096, "minLen": 1}, {"l": {"input": "m", "shape": [None, 4096, 4096]}}, [4096])
