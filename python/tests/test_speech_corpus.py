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


def test_a_manifest_of_real_speech_grouped_by_voice_keeps_each_voice_in_one_split(corpus, tmp_path):
    """Groups on other people's audio (espeak-ng voices, several formats and rates): every
    clip of the corpus in one manifest with its voice as a `speaker` column, no split
    column; group_by draws each voice's split, so no voice is heard in two splits."""
    files = sorted(corpus.glob("*/*/*"))
    rows = [f"{f},{f.parent.name},{f.name.split('-')[0]}" for f in files]
    manifest = tmp_path / "speech.csv"
    manifest.write_text("path,label,speaker\n" + "\n".join(rows) + "\n")
    voices = {r.rsplit(",", 1)[1] for r in rows}
    assert len(voices) >= 3, voices
    report = melctl.build(manifest, tmp_path / "out", preset="speech-16k", loader="stream",
                          on_error="fail", group_by="speaker",
                          split_ratio={"training": 0.6, "testing": 0.4}, seed=2)
    assert sum(s["clips"] for s in report["splits"]) == len(files)
    heard = {}
    for split in ("training", "testing"):
        s = melctl.open(tmp_path / "out", split)
        assert s.meta_columns == ["speaker"]
        for path, voice in zip(s.paths, s.metadata["speaker"]):
            assert Path(path).name.startswith(voice + "-")
            assert heard.setdefault(voice, split) == split, f"{voice} in two splits"
    assert set(heard) == voices and set(heard.values()) == {"training", "testing"}
