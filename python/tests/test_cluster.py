"""Sharded builds where users run them: a process pool (as Dask or Ray would map the
tasks), a real single-node Slurm running the recipe in docs/cluster/, and the Kubernetes
manifests checked against Kubernetes' schemas. Each merged output must equal the
unsharded build of the same clips (scripts/compare_outputs.py)."""

import concurrent.futures
import json
import multiprocessing
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import melctl
from conftest import ROOT, SHORT_CLIPS, melctl_binary

sys.path.insert(0, str(ROOT / "scripts"))
from compare_outputs import compare  # noqa: E402

RECIPES = ROOT / "docs" / "cluster"


@pytest.fixture(scope="module")
def unsharded(demo_data, tmp_path_factory):
    """The CLI's build of the demo clips, and the configuration file it used."""
    base = tmp_path_factory.mktemp("unsharded")
    config = base / "short.toml"
    config.write_text(SHORT_CLIPS)
    out = base / "out"
    subprocess.run(
        [melctl_binary(), "build", "-i", demo_data, "-o", out, "--config", config, "-q"],
        check=True, capture_output=True,
    )
    return out, config


def assert_same(a, b):
    differences, compared = compare(a, b)
    assert not differences, differences
    assert compared > 30, compared


def build_shard(args):
    data, out, config, k, n = args
    report = melctl.build(data, out, config=config, shard=(k, n))
    return report["shard"]


def test_a_process_pool_builds_the_shards_and_merge_joins_them(demo_data, unsharded, tmp_path):
    whole, config = unsharded
    out = tmp_path / "out"
    n = 3
    assert pickle.loads(pickle.dumps(melctl.build)) is melctl.build
    tasks = [(str(demo_data), str(out), str(config), k, n) for k in range(n)]
    # Separate interpreters, as a Dask or Ray worker is.
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=spawn) as pool:
        shards = list(pool.map(build_shard, tasks))
    assert [(s["index"], s["count"], s["built"]) for s in shards] == [(k, n, True) for k in range(n)]
    # A retry of a complete shard does nothing.
    assert build_shard(tasks[1])["built"] is False
    report = melctl.merge(out)
    assert report["shards"] == n
    assert {s["split"] for s in report["splits"]} == {"training", "validation", "testing"}
    assert_same(whole, out)
    with pytest.raises(ValueError, match="numbered from 0"):
        melctl.build(demo_data, out, config=config, shard=(3, 3))
    with pytest.raises(ValueError, match="numbered from 0"):
        melctl.build(demo_data, out, config=config, shard=(-1, 3))
    for bad in (3, (True, 2), (1.0, 2)):
        with pytest.raises(TypeError):
            melctl.build(demo_data, out, config=config, shard=bad)
    with pytest.raises(TypeError):
        melctl.merge(out, shards=True)
    for bad in (0, 2_000_000):
        with pytest.raises(melctl.Error, match="shards"):
            melctl.merge(out, shards=bad)
    with pytest.raises(melctl.DatasetError, match="no shard folder"):
        melctl.merge(tmp_path / "nothing-here" / "x")


def test_the_kubernetes_manifests_are_valid_and_agree_on_the_shard_count():
    try:
        import kubernetes_validate
        import yaml
    except ImportError as e:
        if os.environ.get("MEL_REQUIRE_KUBERNETES_VALIDATE") == "1":
            raise
        pytest.skip(f"{e.name} is not installed (pip install kubernetes-validate): manifests unchecked")
    build = yaml.safe_load((RECIPES / "melctl-build-job.yaml").read_text())
    merge = yaml.safe_load((RECIPES / "melctl-merge-job.yaml").read_text())
    spec = build["spec"]
    assert spec["completionMode"] == "Indexed"
    container = spec["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert int(env["MELCTL_SHARDS"]) == spec["completions"]
    assert container["command"][:2] == ["melctl", "build"]
    assert merge["spec"]["template"]["spec"]["containers"][0]["command"][:2] == ["melctl", "merge"]
    for name in ("melctl-build-job.yaml", "melctl-merge-job.yaml"):
        doc = yaml.safe_load((RECIPES / name).read_text())
        kubernetes_validate.validate(doc, "1.33", strict=True)
    # The check can fail: a field Jobs do not have is refused.
    bad = json.loads(json.dumps(build))
    bad["spec"]["completionsMode"] = "Indexed"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.33", strict=True)


def test_the_slurm_recipe_submits_nothing_without_a_melctl_it_can_run(tmp_path):
    """Without melctl on PATH every task failed with `melctl: not found` and the merge never
    ran, while submit.sh exited 0: it now refuses before submitting anything (no sbatch is
    reachable here, so a submission would fail differently)."""
    env = {"PATH": "/usr/bin:/bin", "MELCTL": str(tmp_path / "no-such-melctl")}
    done = subprocess.run([RECIPES / "submit.sh", tmp_path, tmp_path / "out", "2"], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert "not found" in done.stderr and "MELCTL=" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()
    bad = subprocess.run([RECIPES / "submit.sh", "--cpus", "0", tmp_path, tmp_path / "o", "2"],
                         env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "--cpus 0" in bad.stderr, bad.stderr


def slurm_job_state(job, env):
    out = subprocess.run(
        ["scontrol", "show", "job", "-o", str(job)], env=env, capture_output=True, text=True
    ).stdout
    states = [w.split("=", 1)[1] for w in out.split() if w.startswith("JobState=")]
    return states


def test_the_slurm_recipe_runs_on_a_real_slurm_and_merges_to_the_unsharded_build(
    demo_data, unsharded, tmp_path
):
    whole, config = unsharded
    cluster = tmp_path / "slurm"
    started = subprocess.run(
        [ROOT / "scripts" / "slurm-local.sh", "start", cluster], capture_output=True, text=True
    )
    if started.returncode == 77:
        if os.environ.get("MEL_REQUIRE_SLURM") == "1":
            pytest.fail(f"MEL_REQUIRE_SLURM=1 but no Slurm here: {started.stderr.strip()}")
        pytest.skip(f"no single-node Slurm here: {started.stderr.strip()}")
    assert started.returncode == 0, started.stderr
    env = dict(os.environ, SLURM_CONF=str(cluster / "slurm.conf"))
    env["MELCTL"] = str(melctl_binary())
    env["MELCTL_ARGS"] = f"--config {config}"
    out = tmp_path / "out"
    try:
        submitted = subprocess.run(
            [RECIPES / "submit.sh", "--cpus", "1", "--mem", "500M", demo_data, out, "3"],
            env=env, capture_output=True, text=True, check=True,
        )
        array, merge = submitted.stdout.split()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            states = slurm_job_state(merge, env)
            if states and states[0] not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                break
            time.sleep(0.5)
        logs = "\n".join(
            f"--- {p.name}\n{p.read_text()}" for p in sorted((out / "logs").glob("*.log"))
        )
        assert slurm_job_state(merge, env) == ["COMPLETED"], logs
        assert set(slurm_job_state(array, env)) == {"COMPLETED"}, logs
        assert sorted(p.name for p in (out / "shards").iterdir()) == ["0-of-3", "1-of-3", "2-of-3"]
        assert json.loads((out / "merge-report.json").read_text())["shards"] == 3
        assert_same(whole, out)
    finally:
        subprocess.run([ROOT / "scripts" / "slurm-local.sh", "stop", cluster], capture_output=True)
        shutil.rmtree(cluster, ignore_errors=True)
