"""melctl.open and Split: every accessor, and every value equal to h5py's (or numpy's)
read of the same file, for f16, f32, bf16, chunked + gzip and npy outputs."""

import numpy as np
import pytest

import melctl
from helpers import read_all

SPLITS = ["training", "validation", "testing"]


@pytest.mark.parametrize("build", ["f16", "f32", "bf16", "f16-chunked"])
@pytest.mark.parametrize("name", SPLITS)
def test_every_value_equals_h5pys_read(outputs, build, name):
    path = outputs[build] / f"{name}.h5"
    ref = read_all(path)
    split = melctl.open(path)
    assert len(split) == ref["mel"].shape[0]
    assert split.clip_shape == ref["mel"].shape[1:]
    assert split.segment_shape == ref["mel"].shape[-2:]
    for i in range(len(split)):
        x = split[i]
        assert x.dtype == np.float32
        np.testing.assert_array_equal(x, ref["mel"][i])
    np.testing.assert_array_equal(split.labels, ref["label"])
    assert split.labels.dtype == np.int64
    assert split.paths == ref["path"]
    assert split.label_names == ref["label_names"]
    assert split.config == ref["config"]
    np.testing.assert_array_equal(split.mean, ref["mean"])
    np.testing.assert_array_equal(split.std, ref["std"])
    assert split.stored_dtype == {"f16": "f16", "f32": "f32", "bf16": "bf16", "f16-chunked": "f16"}[build]


def test_npy_values_equal_numpys_read(outputs):
    path = outputs["npy"] / "training.npy.d"
    ref = read_all(path)
    split = melctl.open(path)
    assert len(split) == ref["mel"].shape[0]
    for i in range(len(split)):
        np.testing.assert_array_equal(split[i], ref["mel"][i])
    np.testing.assert_array_equal(split.labels, ref["label"])
    assert split.paths == ref["meta"]["paths"]
    assert split.label_names == ref["meta"]["label_names"]
    # meta.json's decimal figures parse to the same doubles as Python's correctly rounded
    # parse (serde_json's float_roundtrip).
    np.testing.assert_array_equal(split.mean, ref["meta"]["mel_mean"])
    np.testing.assert_array_equal(split.std, ref["meta"]["mel_std"])


def test_open_takes_a_file_a_folder_or_an_output_and_a_split_name(outputs):
    by_file = melctl.open(outputs["f16"] / "training.h5")
    by_name = melctl.open(outputs["f16"], split="training")
    by_str = melctl.open(str(outputs["f16"] / "training.h5"))
    npy = melctl.open(outputs["npy"], "training")
    assert len(by_file) == len(by_name) == len(by_str) == len(npy)
    np.testing.assert_array_equal(by_file[3], by_name[3])
    np.testing.assert_array_equal(by_file[3], npy[3])
    assert by_name.name == "training"
    assert by_file.path == (outputs["f16"] / "training.h5")
    assert "training.h5" in repr(by_file)


def test_indices_behave_like_a_sequence(h5):
    split = melctl.open(h5)
    n = len(split)
    np.testing.assert_array_equal(split[-1], split[n - 1])
    np.testing.assert_array_equal(split[-n], split[0])
    for bad in (n, -n - 1, 10**9):
        with pytest.raises(IndexError):
            split[bad]
    with pytest.raises(TypeError):
        split["0"]
    # A for loop over a sequence stops at IndexError.
    assert sum(1 for _ in split) == n


def test_dtype_float64_and_float16_are_exact(outputs, h5):
    ref = read_all(h5)
    split = melctl.open(h5)
    x64 = split.clip(2, dtype=np.float64)
    assert x64.dtype == np.float64
    np.testing.assert_array_equal(x64, ref["mel"][2].astype(np.float64))
    x16 = split.clip(2, dtype="float16")
    assert x16.dtype == np.float16
    import h5py

    with h5py.File(h5) as f:
        np.testing.assert_array_equal(x16, f["mel"][2])
    as16 = melctl.open(h5, dtype=np.float16)
    assert as16.dtype == "float16" and as16[2].dtype == np.float16
    # float16 would round f32 or bf16 values: refused.
    with pytest.raises(melctl.ConfigError, match="f16"):
        melctl.open(outputs["f32"] / "training.h5", dtype="float16")
    with pytest.raises(melctl.ConfigError):
        melctl.open(outputs["bf16"] / "training.h5").clip(0, dtype="float16")
    with pytest.raises(ValueError, match="int32"):
        split.clip(0, dtype="int32")


def test_segment_k_is_the_clips_kth_segment(outputs):
    for build in ("f16", "bf16", "f16-chunked"):
        split = melctl.open(outputs[build] / "validation.h5")
        clip = split[4].reshape(-1, *split.segment_shape)
        assert split.segments_per_clip == clip.shape[0]
        for k in (0, 1, clip.shape[0] - 1, -1):
            np.testing.assert_array_equal(split.segment(4, k), clip[k])
        with pytest.raises(IndexError):
            split.segment(4, clip.shape[0])


def test_labels_are_read_only_and_cached(h5):
    split = melctl.open(h5)
    labels = split.labels
    assert labels is split.labels
    with pytest.raises(ValueError):
        labels[0] = 3


def test_items_are_fresh_writable_arrays(h5):
    split = melctl.open(h5)
    a = split[0]
    a[...] = 0
    assert split[0].any()


def test_stats_are_the_stored_ones(h5):
    split = melctl.open(h5)
    mean, std = split.stats()
    np.testing.assert_array_equal(mean, split.mean)
    np.testing.assert_array_equal(std, split.std)
