"""Metadata and groups (issue 37): a manifest's extra columns kept per clip and readable
from melctl, h5py and npy; ``group_by`` / ``group_pattern`` keeping each speaker in one
split, the same from Python and the CLI, through shards and a merge; bad groupings
refused with one line."""

import json
import shutil
import subprocess

import h5py
import pytest

import melctl
from conftest import melctl_binary

SHORT = {"audio": {"clip_seconds": 1.0}}
RATIO = {"training": 0.5, "testing": 0.5}


def speakers_manifest(demo_data, tmp_path, speakers=8, split_column=False):
    """The 40 demo clips with a speaker (a clip's index modulo ``speakers``) and a take."""
    wavs = sorted(demo_data.glob("*/*/*.wav"))
    head = "path,label,speaker,take" + (",split" if split_column else "")
    rows = []
    for i, w in enumerate(wavs):
        row = f"{w},{w.parent.name},spk{i % speakers},{i}"
        if split_column:
            row += ",testing" if i % speakers == 0 else ",training"
        rows.append(row)
    manifest = tmp_path / "m.csv"
    manifest.write_text(head + "\n" + "\n".join(rows) + "\n")
    return manifest, wavs


def speakers_by_split(out):
    found = {}
    for split in ("training", "testing"):
        s = melctl.open(out, split)
        found[split] = set(s.metadata["speaker"])
    return found


def test_metadata_is_kept_per_clip_and_reads_the_same_everywhere(demo_data, tmp_path):
    manifest, wavs = speakers_manifest(demo_data, tmp_path, split_column=True)
    melctl.build(manifest, tmp_path / "h5", config=SHORT, loader="stream")
    melctl.build(manifest, tmp_path / "npy", config=SHORT, loader="stream", sink="npy")
    by_path = {str(w): (f"spk{i % 8}", str(i)) for i, w in enumerate(wavs)}
    for out in ("h5", "npy"):
        s = melctl.open(tmp_path / out, "training")
        assert s.meta_columns == ["speaker", "take"]
        assert list(s.metadata) == ["speaker", "take"]
        assert len(s.metadata["speaker"]) == len(s) == len(s.paths)
        for p, spk, take in zip(s.paths, s.metadata["speaker"], s.metadata["take"]):
            assert by_path[p] == (spk, take)
    # h5py in two lines, and the npy folder's meta.json.
    with h5py.File(tmp_path / "h5" / "training.h5", "r") as f:
        assert list(f.attrs["meta_columns"]) == ["speaker", "take"]
        speakers = f["meta/speaker"].asstr()[:]
    assert list(speakers) == melctl.open(tmp_path / "h5", "training").metadata["speaker"]
    meta = json.loads((tmp_path / "npy" / "training.npy.d" / "meta.json").read_text())
    assert meta["meta"]["speaker"] == list(speakers)
    # inspect names the columns.
    out = subprocess.run([melctl_binary(), "inspect", tmp_path / "h5" / "training.h5"],
                         capture_output=True, text=True, check=True).stdout
    assert "metadata    speaker: 7 distinct" in out, out
    # Every split holds the columns.
    assert melctl.open(tmp_path / "h5", "testing").meta_columns == ["speaker", "take"]


def test_group_by_keeps_each_speaker_in_one_split_as_the_cli_does(demo_data, tmp_path):
    manifest, _ = speakers_manifest(demo_data, tmp_path)
    melctl.build(manifest, tmp_path / "py", config=SHORT, loader="stream",
                 split_ratio=RATIO, seed=1, group_by="speaker")
    found = speakers_by_split(tmp_path / "py")
    assert found["training"] and found["testing"]
    assert not found["training"] & found["testing"], found
    assert found["training"] | found["testing"] == {f"spk{i}" for i in range(8)}
    (tmp_path / "short.toml").write_text("[audio]\nclip_seconds = 1.0\n")
    subprocess.run([melctl_binary(), "build", "--manifest", manifest, "-o", tmp_path / "cli",
                    "-q", "--config", tmp_path / "short.toml", "--split-ratio",
                    "training=0.5,testing=0.5", "--seed", "1", "--group-by", "speaker"],
                   check=True)
    for split in ("training", "testing"):
        py, cli = melctl.open(tmp_path / "py", split), melctl.open(tmp_path / "cli", split)
        assert py.paths == cli.paths and py.metadata == cli.metadata
    # Without groups the path hash puts some speaker in both splits: the leak grouping stops.
    melctl.build(manifest, tmp_path / "plain", config=SHORT, loader="stream",
                 split_ratio=RATIO, seed=1)
    plain = speakers_by_split(tmp_path / "plain")
    assert plain["training"] & plain["testing"]


def test_shards_and_their_merge_keep_the_metadata(demo_data, tmp_path):
    manifest, _ = speakers_manifest(demo_data, tmp_path)
    opts = dict(config=SHORT, loader="stream", split_ratio=RATIO, group_by="speaker")
    melctl.build(manifest, tmp_path / "whole", **opts)
    for k in range(3):
        melctl.build(manifest, tmp_path / "sharded", shard=(k, 3), **opts)
    melctl.merge(tmp_path / "sharded")
    for split in ("training", "testing"):
        whole = melctl.open(tmp_path / "whole", split)
        merged = melctl.open(tmp_path / "sharded", split)
        assert merged.paths == whole.paths
        assert merged.metadata == whole.metadata and merged.meta_columns == ["speaker", "take"]
    # Metadata edited after the shards were built: a shard's rerun builds it again (it
    # kept the old values, attack round), and shards of the two manifests do not merge.
    rows = manifest.read_text().splitlines()
    rows[1] = rows[1].rsplit(",", 1)[0] + ",zero"
    manifest.write_text("\n".join(rows) + "\n")
    melctl.build(manifest, tmp_path / "sharded", shard=(0, 3), **opts)
    with pytest.raises(melctl.DatasetError, match="shard"):
        melctl.merge(tmp_path / "sharded")
    for k in (1, 2):
        melctl.build(manifest, tmp_path / "sharded", shard=(k, 3), **opts)
    melctl.merge(tmp_path / "sharded")
    takes = [t for s in ("training", "testing") for t in melctl.open(tmp_path / "sharded", s).metadata["take"]]
    assert "zero" in takes and "0" not in takes


def test_a_folder_of_classes_is_split_by_a_group_pattern(demo_data, tmp_path):
    """Speech Commands' names: WORD/SPEAKER_nohash_N.wav in one ROOT/{class} tree."""
    wavs = sorted(demo_data.glob("*/*/*.wav"))
    flat = tmp_path / "flat"
    for i, w in enumerate(wavs):
        dest = flat / w.parent.name / f"{i % 6:08x}_nohash_{i}.wav"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(w, dest)
    melctl.build(flat, tmp_path / "out", config=SHORT, loader="stream", split_ratio=RATIO,
                 group_pattern=r"([^/]+)_nohash_")
    groups = {}
    for split in ("training", "testing"):
        s = melctl.open(tmp_path / "out", split)
        assert s.meta_columns == ["group"]
        for p, g in zip(s.paths, s.metadata["group"]):
            assert p.split("/")[1].startswith(g + "_nohash_")
            assert groups.setdefault(g, split) == split
    assert len(groups) == 6
    # A tree that names its splits (the demo's) is checked: the demo's file names hold no
    # `_nohash_`, so no clip has a group.
    with pytest.raises(melctl.DatasetError, match="finds no group in"):
        melctl.build(demo_data, tmp_path / "x", config=SHORT, group_pattern=r"([^/]+)_nohash_")


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(group_by="speaker"), melctl.ConfigError, "group_by: a folder has no columns"),
    (dict(group_pattern="_nohash_"), melctl.ConfigError, "group_pattern: \"_nohash_\": no capture group"),
    (dict(group_pattern="(["), melctl.ConfigError, "not a regular expression: unclosed"),
    (dict(group_by="x", group_pattern="(a)"), melctl.ConfigError, "not both"),
    (dict(seed=1), melctl.DatasetError, "first-level folders name the splits"),
])
def test_a_grouping_that_cannot_apply_to_a_folder_is_one_line(demo_data, tmp_path, kwargs,
                                                               error, words):
    with pytest.raises(error, match=words) as e:
        melctl.build(demo_data, tmp_path / "x", config=SHORT, **kwargs)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "x").exists() or not list((tmp_path / "x").iterdir())


def test_a_manifest_grouping_that_cannot_apply_is_one_line(demo_data, tmp_path):
    manifest, _ = speakers_manifest(demo_data, tmp_path)
    with pytest.raises(melctl.DatasetError,
                       match=r"the column \"session\": there is no such column \(its metadata columns are speaker, take\)"):
        melctl.build(manifest, tmp_path / "x", config=SHORT, group_by="session")
    text = manifest.read_text().splitlines()
    text[3] = text[3].replace(",spk2,", ",,")
    manifest.write_text("\n".join(text) + "\n")
    with pytest.raises(melctl.DatasetError, match=r"line 4: no \"speaker\" value"):
        melctl.build(manifest, tmp_path / "x", config=SHORT, group_by="speaker")
    (tmp_path / "named").mkdir()
    named, _ = speakers_manifest(demo_data, tmp_path / "named", split_column=True)
    rows = named.read_text().splitlines()
    rows[2] = rows[2].replace(",training", ",testing")  # spk1's first clip moves to testing
    named.write_text("\n".join(rows) + "\n")
    with pytest.raises(melctl.DatasetError, match=r"the group \"spk1\" has clips in the splits"):
        melctl.build(named, tmp_path / "y", config=SHORT, group_by="speaker")
    (tmp_path / "Split.csv").write_text("path,label,Split\nx.wav,a,testing\n")
    with pytest.raises(melctl.DatasetError, match="looks like the manifest's \"split\" column"):
        melctl.build(tmp_path / "Split.csv", tmp_path / "z", config=SHORT)
