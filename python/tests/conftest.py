"""The package under test, and test datasets.

The package is this checkout's: `python/melctl` with the extension module that `cargo
test --workspace` (the README's test command, just before pytest) compiled, staged
under `target/pytest-melctl/` and put first on `sys.path` and `PYTHONPATH` (so child
interpreters import it too). The tests thus check the sources they sit beside, and the
workspace compiles the Rust code once for both test suites. `MELCTL_TEST_INSTALLED=1`
tests the installed package instead (the wheel `scripts/wheel.sh` builds, as
`scripts/wheel-check.sh` installs it in CI): then the `melctl` command is the package's
console script, and nothing may need cargo or the Rust sources.

Test datasets are built once per session by the real melctl binary from `melctl demo`'s
generated clips (one-second clips, so builds take a second), under a temporary folder.

The binary is $MELCTL_BIN if set; else, testing an installed package, its `melctl`
console script; else the workspace's `target/debug/melctl` as the README's test command
leaves it (`cargo test --workspace` builds it first), else one built with `cargo build -p
melctl`. Only these datasets come from it: every value the tests
check is compared with an independent read (h5py, numpy).
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The caller's settings that would change what melctl does, cleared for this interpreter
# and every child it starts: inside a Slurm array task every CLI build would become a
# shard build, and melctl's own variables would steer the runs. The tests' switches stay
# (MELCTL_TEST_*, MELCTL_BIN, MEL_REQUIRE_*: read by the tests, never by melctl).
KEPT = ("MELCTL_TEST_", "MELCTL_BIN", "MEL_REQUIRE_")


def callers_setting(name: str) -> bool:
    """Whether `name` is a variable of the caller's machine that steers melctl."""
    if name.startswith(KEPT):
        return False
    return name.startswith(("SLURM_", "MELCTL_", "MEL_")) or name == "JOB_COMPLETION_INDEX"


for _name in [n for n in os.environ if callers_setting(n)]:
    del os.environ[_name]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))


def stage_workspace_package() -> str:
    """Copies python/melctl and the extension cargo built into target/pytest-melctl and
    puts that first on the import path of this interpreter and its children."""
    if os.environ.get("MELCTL_TEST_INSTALLED") == "1":
        return "melctl: the installed package (MELCTL_TEST_INSTALLED=1)"
    staged = os.environ.get("MELCTL_TEST_STAGED")
    if staged:
        # A child interpreter of the tests (spawn, forkserver): already on its path.
        return f"melctl: staged in {staged}"
    built = TARGET / "debug" / "deps" / "lib_melctl.so"
    if not built.exists():
        raise pytest.UsageError(
            f"{built} is missing: run `cargo test --workspace` first (it compiles the "
            "extension), or set MELCTL_TEST_INSTALLED=1 to test an installed melctl"
        )
    # The extension's own sources: its crate's and those of the crates it links (not
    # their tests or examples, which cargo test may rebuild without relinking it).
    linked = ["mel-core", "mel-audio", "mel-loaders", "mel-sinks", "melkit", "melread", "melctl"]
    sources = [ROOT / "python" / "src"] + [ROOT / "crates" / c / "src" for c in linked]
    sources += [b / "src" for b in (ROOT / "backends").iterdir()]
    newest = max(p.stat().st_mtime for d in sources for p in d.rglob("*") if p.is_file())
    if newest > built.stat().st_mtime:
        raise pytest.UsageError(
            f"{built} is older than the Rust sources: run `cargo test --workspace` first"
        )
    stage = TARGET / "pytest-melctl"
    package = stage / "melctl"
    shutil.rmtree(stage, ignore_errors=True)
    shutil.copytree(ROOT / "python" / "melctl", package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy2(built, package / ("_melctl" + sysconfig.get_config_var("EXT_SUFFIX")))
    sys.path.insert(0, str(stage))
    os.environ["MELCTL_TEST_STAGED"] = str(stage)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(stage)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    return f"melctl: this checkout's, extension from {built}"


PACKAGE = stage_workspace_package()
INSTALLED = os.environ.get("MELCTL_TEST_INSTALLED") == "1"


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """Every cache a test's build makes goes under the session's temporary folder, never
    the caller's home (XDG_CACHE_HOME, for this interpreter and its children)."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


def pytest_report_header(config):
    return PACKAGE
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
    if INSTALLED:
        script = shutil.which("melctl")
        if script is None:
            raise pytest.UsageError("the installed melctl package has no `melctl` command on PATH")
        return Path(script)
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


def need_torch():
    """torch, or a skip saying it is missing; where MEL_REQUIRE_TORCH=1 (CI, whose setup
    installs it) a missing torch fails instead: the torch surface is never skipped there."""
    try:
        import torch
    except ImportError as e:
        if os.environ.get("MEL_REQUIRE_TORCH") == "1":
            pytest.fail(f"MEL_REQUIRE_TORCH=1 but torch does not import: {e}")
        pytest.skip("torch is not installed: the torch tests are skipped here", allow_module_level=True)
    return torch
