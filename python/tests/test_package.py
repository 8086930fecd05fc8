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
    env = dict(os.environ, PYTHONPATH=package, MYPYPATH=package)
    r = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "melctl",
         "--mypy-config-file", str(PYTHON / "pyproject.toml"),
         "--allowlist", str(PYTHON / "stubtest-allowlist.txt")],
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
