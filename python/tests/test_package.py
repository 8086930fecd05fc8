"""The package's face: what __init__ exports, and type stubs that name exactly that."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import melctl

PYTHON = Path(__file__).resolve().parents[1]


def test_the_stubs_name_what_the_module_has():
    stub = Path(melctl.__file__).with_name("_melctl.pyi")
    assert (Path(melctl.__file__).with_name("py.typed")).exists()
    tree = ast.parse(stub.read_text())
    named = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    named |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
    public = set(melctl.__all__)
    assert public - {"__version__"} <= named | {"__version__"}
    for name in named & public:
        assert hasattr(melctl, name), name
    # Every public method and property of the classes is in the stubs.
    for cls in (melctl.Split, melctl.Loader):
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
        stubbed = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        actual = {a for a in dir(cls) if not a.startswith("_")}
        assert actual <= stubbed, actual - stubbed


def test_everything_public_has_a_docstring():
    for name in melctl.__all__:
        obj = getattr(melctl, name)
        if name != "__version__":
            assert obj.__doc__, name
    for cls in (melctl.Split, melctl.Loader):
        for attr in dir(cls):
            if not attr.startswith("_"):
                assert getattr(cls, attr).__doc__, f"{cls.__name__}.{attr}"


def test_help_shows_what_the_stubs_say():
    """``help()`` on a runtime class or function shows the stubs' docstring: one text,
    in the Rust docs (what pyo3 makes ``__doc__``) and in the stubs (what IDEs show)."""
    import inspect

    tree = ast.parse(Path(melctl.__file__).with_name("_melctl.pyi").read_text())
    checked = 0
    for node in tree.body:
        if not isinstance(node, (ast.ClassDef, ast.FunctionDef)) or node.name.startswith("_"):
            continue
        stub = ast.get_docstring(node)
        if stub is None or "Error" in node.name:
            continue
        assert inspect.getdoc(getattr(melctl, node.name)) == stub, node.name
        checked += 1
    assert checked >= 11


def test_version():
    assert melctl.__version__.count(".") == 2


def test_the_stubs_match_the_module_by_stubtest():
    """mypy's stubtest compares every stub with the built module: names, signatures,
    defaults, classes (IoError an OSError, ConfigError a ValueError), `__all__`; a class
    registered without a stub (Batches was) fails. CI requires it (MEL_REQUIRE_STUBTEST=1)."""
    try:
        import mypy  # noqa: F401
    except ImportError:
        if os.environ.get("MEL_REQUIRE_STUBTEST") == "1":
            pytest.fail("MEL_REQUIRE_STUBTEST=1 but mypy is not installed (scripts/setup.sh installs it)")
        pytest.skip("mypy is not installed: the stubs are not checked here (scripts/setup.sh installs it)")
    package = str(Path(melctl.__file__).parents[1])
    # The checkout's staged package is put on the paths; an installed one (a site-packages
    # folder, which mypy refuses on MYPYPATH) is found as installed, by its py.typed.
    from conftest import INSTALLED

    env = dict(os.environ) if INSTALLED else dict(os.environ, PYTHONPATH=package, MYPYPATH=package)
    # melctl.torch is allowed unchecked only where torch is missing (it cannot import);
    # where torch is installed it is checked like the rest.
    try:
        import torch  # noqa: F401

        allow = []
    except ImportError:
        allow = ["--allowlist", str(PYTHON / "stubtest-allowlist.txt")]
    r = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "melctl",
         "--mypy-config-file", str(PYTHON / "pyproject.toml"), *allow],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_errors_are_also_the_standard_exceptions_they_are():
    assert issubclass(melctl.IoError, OSError) and issubclass(melctl.OutputError, OSError)
    for cls in (melctl.ConfigError, melctl.ConfigParseError, melctl.UnknownPresetError, melctl.ShapeError):
        assert issubclass(cls, ValueError) and issubclass(cls, melctl.Error), cls
    assert set(melctl._melctl.__errors__) <= set(melctl.__all__)
    with pytest.raises(OSError):
        melctl.open("/nonexistent/training.h5")
    with pytest.raises(ValueError, match="n_mels"):
        melctl.Extractor(n_mels=0)


def _cli(*args, **kw):
    """`python -m melctl ARGS` in a child interpreter (it imports the package under test)."""
    return subprocess.run([sys.executable, "-m", "melctl", *map(str, args)],
                          capture_output=True, text=True, timeout=300, **kw)


def test_python_dash_m_melctl_is_the_cli_itself(tmp_path):
    """`python -m melctl` runs the CLI crate's own code: its help, its configuration text
    and its exit statuses are the binary's, byte for byte."""
    from conftest import melctl_binary

    binary = melctl_binary()
    for args in (["--version"], ["config", "--preset", "speech-16k", "--dtype", "f32"]):
        ours = _cli(*args)
        theirs = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)
        assert ours.returncode == 0, ours.stderr
        assert ours.stdout == theirs.stdout
    help_text = _cli("--help").stdout
    for command in ("build", "merge", "inspect", "show", "demo"):
        assert command in help_text
    # A usage error: status 2 and clap's message, as the binary says it.
    bad = _cli("build", "--no-such-flag")
    assert bad.returncode == 2 and "--no-such-flag" in bad.stderr
    # A refused value: status 1, one line naming the flag.
    refused = _cli("config", "--threads", "100000")
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1 and "run.threads (--threads)" in refused.stderr


def test_python_dash_m_melctl_builds_and_inspects(tmp_path, demo_data):
    """A whole build through `python -m melctl`, read back by the package."""
    config = tmp_path / "short.toml"
    config.write_text("[audio]\nclip_seconds = 1.0\n")
    out = tmp_path / "out"
    built = _cli("build", "-i", demo_data, "-o", out, "--config", config, "-q")
    assert built.returncode == 0, built.stderr
    inspected = _cli("inspect", "--json", out / "training.h5")
    assert inspected.returncode == 0, inspected.stderr
    import json

    summary = json.loads(inspected.stdout)
    split = melctl.open(out, "training")
    assert sum(n for _, n in summary["classes"]) == len(split) > 0


def test_verify_raises_naming_a_split_of_another_build(tmp_path, demo_data):
    """`melctl.verify` is `melctl verify`: whole folders pass; a split left by another
    build (what a kill between two publish renames leaves, and h5py reads silently) is
    named in a DatasetError, or in the verdict with strict=False."""
    import shutil

    for out in ("a", "b"):
        melctl.build(demo_data, tmp_path / out, config={"audio": {"clip_seconds": 1.0}})
    verdict = melctl.verify(tmp_path / "a")
    assert verdict["whole"] and len(verdict["splits"]) == 3 and verdict["problems"] == []
    shutil.copy(tmp_path / "b" / "training.h5", tmp_path / "a" / "training.h5")
    with pytest.raises(melctl.DatasetError, match='split "training"'):
        melctl.verify(tmp_path / "a")
    verdict = melctl.verify(tmp_path / "a", strict=False)
    assert not verdict["whole"]
    bad = [s for s in verdict["splits"] if s["problem"]]
    assert [s["name"] for s in bad] == ["training"]


def test_python_dash_m_melctl_with_a_closed_stdout_is_the_binarys_status(tmp_path):
    """`melctl config >&-`: the binary says nothing and exits 0 (a closed stdout is not an
    error, as with `| head`); the Python command did the same only after a traceback
    (`sys.stdout` is None there)."""
    from conftest import melctl_binary

    for command in ([sys.executable, "-m", "melctl"], [str(melctl_binary())]):
        r = subprocess.run([*command, "config"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, timeout=300, preexec_fn=lambda: os.close(1))
        assert r.returncode == 0, (command, r.stderr)
        assert "Traceback" not in r.stderr, r.stderr
