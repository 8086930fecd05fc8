"""melctl.Extractor: exactly what a build stores for a clip, from a file or from samples,
one clip or a batch of rows, at any rate; bad input refused with a clear error."""

import pickle
import wave
from pathlib import Path

import numpy as np
import pytest

import melctl
from helpers import interruptible_child

SHORT = {"audio": {"clip_seconds": 1.0}}


def pcm(path):
    """A 16-bit mono WAV's samples in [-1, 1] and its rate, read with the wave module."""
    with wave.open(str(path)) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1
        raw = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        return raw.astype(np.float32) / 32768.0, w.getframerate()


@pytest.mark.parametrize("build", ["f16", "f32", "bf16"])
def test_a_file_and_its_samples_give_what_the_build_stored(outputs, demo_data, build):
    split = melctl.open(outputs[build], "training")
    ex = melctl.Extractor(config=SHORT, dtype=None, output={"dtype": split.stored_dtype},
                          backend="cpu")
    assert ex.backend == "cpu" and list(ex.clip_shape) == list(split.clip_shape)
    for i in (0, 7, len(split) - 1):
        stored = split[i]
        path = demo_data / split.paths[i]
        assert np.array_equal(ex.file(path), stored)
        samples, rate = pcm(path)
        assert np.array_equal(ex(samples, rate), stored)


def test_rows_rates_and_dtypes(outputs, demo_data):
    split = melctl.open(outputs["f16"], "testing")
    ex = melctl.Extractor(config=SHORT)
    rows = np.stack([pcm(demo_data / split.paths[i])[0] for i in range(3)])
    batch = ex(rows, 4096)
    assert batch.shape == (3, *split.clip_shape) and batch.dtype == np.float32
    for i in range(3):
        assert np.array_equal(batch[i], split[i])
    # Another rate is resampled, row by row, as a decoded file of that rate would be.
    slow = np.repeat(rows, 2, axis=1)
    two = ex(slow, 8192)
    assert np.array_equal(two[1], ex(slow[1], 8192))
    # float64 input is taken (rounded to float32 as decoding does); float16 out as stored.
    assert np.array_equal(ex(rows.astype(np.float64), 4096), batch)
    raw = melctl.Extractor(config=SHORT, dtype="float16")(rows[0], 4096)
    assert raw.dtype == np.float16 and np.array_equal(raw, split.clip(0, dtype="float16"))
    wide = melctl.Extractor(config=SHORT, dtype="float64")(rows[0], 4096)
    assert wide.dtype == np.float64 and np.array_equal(wide, batch[0].astype(np.float64))


def test_bad_input_is_refused_clearly():
    ex = melctl.Extractor(config=SHORT)
    with pytest.raises(TypeError, match="scale integer PCM"):
        ex(np.zeros(4096, dtype=np.int16), 4096)
    with pytest.raises(ValueError, match="1-D .* or 2-D"):
        ex(np.zeros((2, 2, 2), dtype=np.float32), 4096)
    with pytest.raises(ValueError, match="no samples"):
        ex(np.zeros(0, dtype=np.float32), 4096)
    bad = np.zeros((3, 4096), dtype=np.float32)
    bad[2, 100] = np.nan
    with pytest.raises(melctl.UnsupportedError, match="row 2"):
        ex(bad, 4096)
    with pytest.raises(melctl.Error):
        ex(np.zeros(100, dtype=np.float32), 0)
    with pytest.raises(melctl.IoError):
        ex.file("/nonexistent.wav")
    with pytest.raises(ValueError, match="float16"):
        melctl.Extractor(config=SHORT, dtype="float16", output={"dtype": "f32"})
    with pytest.raises(melctl.ConfigError):
        melctl.Extractor(n_mels=0)
    # A scalar was taken as a 1-sample clip; (frames, channels) from soundfile.read as
    # thousands of 2-sample clips.
    with pytest.raises(ValueError, match=r"got shape \[\]"):
        ex(0.5, 4096)
    with pytest.raises(ValueError, match="frames, channels"):
        ex(np.zeros((19584, 2), dtype=np.float32), 4096)
    assert ex(np.zeros((2, 19584), dtype=np.float32), 4096).shape[0] == 2
    # A float64 sample beyond float32 was "sample is inf" after a numpy warning.
    with pytest.raises(ValueError, match="beyond the float32 range"):
        ex(np.full(4096, 1e300), 4096)


def test_keywords_of_keys_unset_by_default_are_known():
    """`top_db=80.0` and `device=0` were refused as unknown keys: keys whose value is
    unset were missing from the lookup."""
    ex = melctl.Extractor(config=SHORT, top_db=80.0, backend="cpu")
    assert "top_db = 80.0" in ex.config
    # device is a known key: the extractor starts, or is refused for another reason.
    try:
        assert "device = 0" in melctl.Extractor(config=SHORT, device=0, backend="cpu").config
    except melctl.Error as e:
        assert "no configuration key" not in str(e)
    with pytest.raises(ValueError, match="no configuration key"):
        melctl.Extractor(config=SHORT, no_such_key=1)


def test_an_extractor_pickles_by_configuration():
    ex = melctl.Extractor(config=SHORT, n_mels=16, dtype="float64", backend="cpu")
    back = pickle.loads(pickle.dumps(ex))
    assert back.config == ex.config and back.dtype == "float64"
    tone = np.sin(np.arange(4096, dtype=np.float32) * 0.3) * 0.5
    assert np.array_equal(back(tone, 4096), ex(tone, 4096))


def test_the_stored_dtype_is_an_override_and_a_numpy_dtype_the_results():
    tone = np.sin(np.arange(4096, dtype=np.float32) * 0.3) * 0.5
    f32 = melctl.Extractor(config=SHORT, dtype="f32")
    assert "dtype = \"f32\"" in f32.config and f32.dtype == "float32"
    bf = melctl.Extractor(config=SHORT, dtype="bf16")
    assert "dtype = \"bf16\"" in bf.config
    # bf16 keeps 8 bits of mantissa: the widened values differ from f32's, and are exact bf16.
    v = bf(tone, 4096)
    assert not np.array_equal(v, f32(tone, 4096))
    assert np.array_equal(v.view(np.uint32) & 0xFFFF, np.zeros_like(v.view(np.uint32)))


def test_an_output_too_large_to_allocate_is_an_error_not_an_abort():
    try:
        overcommit = open("/proc/sys/vm/overcommit_memory").read().strip()
    except OSError:
        overcommit = "unknown"
    if overcommit == "1":
        pytest.skip("vm.overcommit_memory = 1: any allocation succeeds, so none can be refused")
    ex = melctl.Extractor()
    # 10**6 rows of 64 samples: 256 MB in (of untouched zero pages), 10**6 ten-second clips
    # × 37,920 f16 values (76 GB) out. (Rows shorter than 64 samples are taken for
    # (frames, channels) and refused for that.)
    with pytest.raises(melctl.LimitError, match="cannot be allocated"):
        ex(np.zeros((10**6, 64), dtype=np.float32), 4096)


def test_an_output_beyond_the_address_space_left_is_a_limit_error_not_an_abort():
    """12,000 rows of 64 samples: 3 MB in, 0.9 GB of f16 features, 1.8 GB widened to
    float32 for numpy. Under a 2.5 GB address-space limit the float32 copy was an
    infallible allocation: "memory allocation failed", SIGABRT, no exception."""
    import subprocess
    import sys

    script = """
import resource, numpy as np, melctl
ex = melctl.Extractor(backend="cpu")
resource.setrlimit(resource.RLIMIT_AS, (2_500_000_000, resource.RLIM_INFINITY))
try:
    ex(np.zeros((12000, 64), np.float32), 4096)
    print("computed")
except melctl.LimitError as e:
    print("refused", e)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"the child died ({r.returncode}): {r.stderr[-2000:]}"
    assert r.stdout.startswith("refused") and "cannot be allocated" in r.stdout, r.stdout


def test_ctrl_c_ends_a_long_extraction():
    """A real SIGINT in a child: KeyboardInterrupt well before the call would end."""
    import textwrap

    script = textwrap.dedent(
        """
        import time, numpy as np, melctl
        ex = melctl.Extractor(backend="cpu")
        rows = np.zeros((5000, 4096), dtype=np.float32)
        print("start", flush=True)
        t = time.perf_counter()
        try:
            ex(rows, 4096)
            print("finished", flush=True)
        except KeyboardInterrupt:
            print("interrupted after", time.perf_counter() - t, flush=True)
        """
    )
    child = interruptible_child(script)
    assert child.stdout.readline().strip() == "start"
    import signal
    import time

    time.sleep(1.0)
    child.send_signal(signal.SIGINT)
    rest = child.stdout.read()
    assert child.wait(timeout=120) == 0
    assert rest.startswith("interrupted after"), rest
    assert float(rest.split()[-1]) < 30, rest


def test_fast_precision_builds_and_extracts_the_same_values(demo_data, tmp_path):
    """precision="fast" is a spec key: the build records it, and an Extractor made from
    the stored configuration gives what the fast build stored (not the exact values)."""
    out = tmp_path / "fast"
    melctl.build(demo_data, out, config=SHORT, backend="cpu", dtype="f32",
                 precision="fast", progress=None)
    split = melctl.open(out, "training")
    assert split.config["mel"]["precision"] == "fast"
    fast = melctl.Extractor(config=split.config, dtype=None, backend="cpu")
    exact = melctl.Extractor(config=SHORT, dtype=None, output={"dtype": "f32"}, backend="cpu")
    path = demo_data / split.paths[0]
    stored = split[0]
    assert np.array_equal(fast.file(path), stored)
    assert not np.array_equal(exact.file(path), stored)
    near = stored > stored.max() - 100
    assert np.abs(exact.file(path) - stored)[near].max() < 0.06
    with pytest.raises(melctl.Error, match="precision"):
        melctl.Extractor(config=SHORT, precision="fastest")


def test_a_decoder_panic_is_a_decode_error_with_nothing_on_stderr(tmp_path, capfd, monkeypatch):
    """A CAF whose `desc` says 2**32 - 1 bytes per packet makes the decoding library panic:
    the interpreter's stderr got the panic's text (and a backtrace under RUST_BACKTRACE)
    before the DecodeError."""
    monkeypatch.setenv("RUST_BACKTRACE", "1")
    corpus = Path(__file__).resolve().parents[2] / "fixtures" / "corpus"
    caf = bytearray((corpus / "clip.caf").read_bytes())
    assert caf[8:12] == b"desc"
    caf[36:40] = b"\xff\xff\xff\xff"
    bad = tmp_path / "bpp.caf"
    bad.write_bytes(bytes(caf))
    ex = melctl.Extractor(config=SHORT)
    with pytest.raises(melctl.DecodeError, match="the decoder failed on this file"):
        ex.file(bad)
    err = capfd.readouterr().err
    assert "panicked" not in err and "backtrace" not in err, err
