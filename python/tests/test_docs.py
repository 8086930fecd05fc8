"""The docs' Python snippets run as written: each ```python block of docs/reading.md, on a
demo build (its `target/melctl-demo/out` pointed at the session's test output)."""

import re
from pathlib import Path

import pytest

from conftest import ROOT

READING = ROOT / "docs" / "reading.md"


def snippets(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def test_reading_md_has_snippets_to_run():
    assert len(snippets(READING)) >= 4


@pytest.mark.parametrize("index", range(len(snippets(READING))))
def test_each_snippet_of_reading_md_runs(index, outputs, capsys):
    code = snippets(READING)[index].replace("target/melctl-demo/out", str(outputs["f16"]))
    exec(compile(code, f"{READING}:snippet {index}", "exec"), {})
