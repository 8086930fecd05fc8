"""The docs' Python snippets run as written: each ```python block of docs/reading.md and
of the README, on a demo build (`target/melctl-demo/out` pointed at the session's test
output)."""

import re
from pathlib import Path

import pytest

from conftest import ROOT, need_torch

READING = ROOT / "docs" / "reading.md"


def snippets(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def test_reading_md_has_snippets_to_run():
    assert len(snippets(READING)) >= 4


@pytest.mark.parametrize("index", range(len(snippets(READING))))
def test_each_snippet_of_reading_md_runs(index, outputs, capsys):
    code = snippets(READING)[index].replace("target/melctl-demo/out", str(outputs["f16"]))
    if "import torch" in code:
        need_torch()
    exec(compile(code, f"{READING}:snippet {index}", "exec"), {})


README = ROOT / "README.md"


def test_the_readmes_python_snippets_run_as_written(outputs, demo_data, tmp_path, monkeypatch):
    """Every ```python block of the README, in order and in one namespace (a later block
    uses what an earlier one made), from a folder whose `target/melctl-demo` holds the
    session's demo data and build."""
    need_torch()
    demo = tmp_path / "target" / "melctl-demo"
    demo.mkdir(parents=True)
    (demo / "data").symlink_to(demo_data)
    (demo / "out").symlink_to(outputs["f16"])
    monkeypatch.chdir(tmp_path)
    blocks = snippets(README)
    assert len(blocks) >= 5
    namespace: dict = {}
    for index, code in enumerate(blocks):
        exec(compile(code, f"{README}:snippet {index}", "exec"), namespace)
    assert (demo / "out-64" / "training.h5").exists()
