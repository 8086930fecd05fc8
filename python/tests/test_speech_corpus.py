"""The real-speech corpus generator: speaker-disjoint splits, several formats and rates,
and files melctl decodes and builds. Skipped, with the reason printed, where espeak-ng or
sox is not installed (scripts/setup.sh installs both where it can)."""

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import melctl

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "make_speech_corpus.py"

pytestmark = pytest.mark.skipif(
    shutil.which("espeak-ng") is None or shutil.which("sox") is None,
    reason="espeak-ng or sox is not installed: the speech corpus generator is untested here",
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("speech") / "corpus"
    subprocess.run([sys.executable, SCRIPT, out, "--speakers", "1", "--seed", "3"],
                   check=True, capture_output=True)
    return out


def test_speakers_are_disjoint_and_every_word_is_spoken(corpus):
    variants = {}
    for split in ("training", "validation", "testing"):
        files = list((corpus / split).glob("*/*"))
        words = Counter(f.parent.name for f in files)
        assert len(words) >= 8 and len(set(words.values())) == 1, words
        # File names are VARIANT-K_WORD.EXT; a variant is a voice heard in one split only.
        variants[split] = {f.name.split("-")[0] for f in files}
    assert not variants["training"] & variants["testing"]
    assert not variants["training"] & variants["validation"]
    assert not variants["validation"] & variants["testing"]


def test_formats_and_rates_vary_and_melctl_builds_them(corpus, tmp_path):
    files = list(corpus.glob("*/*/*"))
    assert {f.suffix for f in files} >= {".wav", ".flac", ".ogg", ".mp3"}
    rates = set()
    for f in files:
        out = subprocess.run(["soxi", "-r", f], capture_output=True, text=True, check=True)
        rates.add(int(out.stdout.strip()))
    assert len(rates) >= 4, rates
    report = melctl.build(corpus, tmp_path / "out", preset="speech-16k", loader="stream",
                          on_error="fail")
    assert sum(s["clips"] for s in report["splits"]) == len(files)
    train = melctl.open(tmp_path / "out", "training")
    assert train.clip_shape == (80, 101) and len(train.label_names) >= 8
    # The same file gives the same spectrogram through the Extractor.
    ex = melctl.Extractor(preset="speech-16k")
    i = next(k for k, p in enumerate(train.paths) if p.endswith(".mp3"))
    assert (ex.file(corpus / train.paths[i]) == train[i]).all()
