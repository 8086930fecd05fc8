"""Test datasets, built once per session by the real melctl binary from `melctl demo`'s
generated clips (one-second clips, so builds take a second), under a temporary folder.

The binary is $MELCTL_BIN if set, else the workspace's `target/debug/melctl` as the
README's test command leaves it (`cargo test --workspace` builds it first), else one built
with `cargo build -p melctl`. Only these datasets come from it: every value the tests
check is compared with an independent read (h5py, numpy).
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHORT_CLIPS = "[audio]\nclip_seconds = 1.0\n"

# name -> extra configuration (TOML) and flags of a build of the demo clips.
BUILDS = {
    "f16": ("", []),
    "f32": ("", ["--dtype", "f32"]),
    "bf16": ("", ["--dtype", "bf16"]),
    "f16-chunked": ("[hdf5]\nchunk_clips = 3\ngzip = 1\n", []),
    "npy": ("", ["--sink", "npy"]),
}


def melctl_binary() -> Path:
    given = os.environ.get("MELCTL_BIN")
    if given:
        return Path(given).resolve()
    built = ROOT / "target" / "debug" / "melctl"
    if not built.exists():
        subprocess.run(["cargo", "build", "-p", "melctl", "--quiet"], cwd=ROOT, check=True)
    return built


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory):
    """The folder of 40 generated demo clips (`ROOT/{split}/{class}/*.wav`)."""
    base = tmp_path_factory.mktemp("melctl-data")
    subprocess.run(
        [melctl_binary(), "demo", "--clips", "40", "--no-build", "demo"],
        cwd=base, check=True, capture_output=True,
    )
    yield base / "demo" / "data"
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def outputs(demo_data):
    """{build name: output folder}: the same 40 demo clips built five ways by the CLI."""
    base = demo_data.parent.parent
    melctl = melctl_binary()
    built = {}
    for name, (toml, flags) in BUILDS.items():
        config = base / f"{name}.toml"
        config.write_text(SHORT_CLIPS + toml)
        out = base / name
        subprocess.run(
            [melctl, "build", "-i", demo_data, "-o", out, "--config", config, "-q", *flags],
            cwd=base, check=True, capture_output=True,
        )
        built[name] = out
    return built


@pytest.fixture(scope="session")
def h5(outputs):
    """The default (f16, contiguous) training split's file."""
    return outputs["f16"] / "training.h5"
