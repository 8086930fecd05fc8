"""The package's face: what __init__ exports, and type stubs that name exactly that."""

import ast
from pathlib import Path

import melctl


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
