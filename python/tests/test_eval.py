"""File-level evaluation from Python: melread's decisions, in batches of any order."""

import numpy as np
import pytest

import melctl


def test_mean_and_vote_decide_as_melread_documents():
    # Two files, three segments each, two classes.
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8], [0.3, 0.7], [0.4, 0.6], [0.6, 0.4]])
    r = melctl.evaluate_files(probs, [0, 0, 0, 1, 1, 1], truth=[0, 1])
    assert r["decisions"].tolist() == [0, 1] and r["accuracy"] == 1.0
    assert r["confusion"].tolist() == [[1, 0], [0, 1]]
    # File 0 by vote: two segments say 0; file 2 none scored: -1, not counted.
    ev = melctl.FileEvaluator([0, 1, 1], classes=2)
    ev.add(probs[3:], [1, 1, 1])
    ev.add(probs[:3], [0, 0, 0])
    v = ev.report("vote")
    assert v["decisions"].tolist() == [0, 1, -1] and v["files"] == 2 and v["correct"] == 2
    # Binary: class 1 is positive when its mean probability reaches the threshold.
    b = ev.report("mean", positive=1, threshold=0.55)
    assert b["decisions"].tolist()[:2] == [0, 1]
    assert b["scores"][1] == pytest.approx((0.7 + 0.6 + 0.4) / 3)


def test_batches_in_any_order_give_one_calls_answer():
    rng = np.random.default_rng(3)
    files = rng.integers(0, 20, 500)
    probs = rng.dirichlet(np.ones(4), 500).astype(np.float32)
    truth = rng.integers(0, 4, 20)
    whole = melctl.evaluate_files(probs, files, truth.tolist(), classes=4)
    ev = melctl.FileEvaluator(truth.tolist(), 4)
    order = rng.permutation(500)
    for part in np.array_split(order, 7):
        ev.add(probs[part], files[part])
    parts = ev.report()
    assert np.array_equal(whole["decisions"], parts["decisions"])
    assert np.array_equal(whole["confusion"], parts["confusion"])


def test_bad_batches_are_refused():
    ev = melctl.FileEvaluator([0, 1], 2)
    with pytest.raises(ValueError, match="probs must be"):
        ev.add(np.zeros((3, 3)), [0, 0, 0])
    with pytest.raises(ValueError, match="rows of probabilities"):
        ev.add(np.zeros((3, 2)), [0, 0])
    with pytest.raises(melctl.ShapeError, match="beyond"):
        ev.add(np.zeros((1, 2)), [5])
    with pytest.raises(ValueError, match="negative"):
        ev.add(np.zeros((1, 2)), [-1])
    with pytest.raises(ValueError, match="rule"):
        ev.report("median")
    with pytest.raises(ValueError, match="positive"):
        ev.report("mean", threshold=0.3)
    with pytest.raises(melctl.ShapeError):
        melctl.FileEvaluator([0, 3], 2)


def test_a_loaders_segments_scored_by_truth_give_accuracy_one(outputs, demo_data, tmp_path):
    split = melctl.open(outputs["f16"], "training")
    ev = melctl.FileEvaluator.for_split(split, melctl.open(outputs["f16"], "testing"))
    classes = len(split.label_names)
    for x, y, clip in melctl.Loader(split, 64, with_index=True):
        ev.add(np.eye(classes, dtype=np.float32)[y], clip)
    r = ev.report()
    assert r["files"] == len(split) and r["accuracy"] == 1.0
    assert np.array_equal(r["truth"], split.labels)
    # A model trained on other mel bins cannot score this split.
    melctl.build(demo_data, tmp_path / "o", config={"audio": {"clip_seconds": 1.0}},
                 loader="stream", n_mels=16, splits=["testing"])
    with pytest.raises(melctl.DatasetError, match="n_mels"):
        melctl.FileEvaluator.for_split(split, melctl.open(tmp_path / "o", "testing"))


def test_what_the_attack_found_is_refused():
    # Class ids or counts that would need terabytes of counters: an error, not an abort.
    with pytest.raises(melctl.ConfigError, match="classes"):
        melctl.FileEvaluator([0, 2**40])
    with pytest.raises(melctl.ConfigError, match="classes"):
        melctl.FileEvaluator([0], classes=2**40)
    ev = melctl.FileEvaluator([0, 1], 2)
    # Probabilities that are not numbers or are negative would flip decisions silently.
    for bad in (np.nan, np.inf, -0.5):
        with pytest.raises(melctl.ShapeError, match="finite and not negative"):
            ev.add(np.array([[bad, 0.5]]), [0])
    # File ids are integers: 1.7 is not file 1.
    with pytest.raises(ValueError, match="integer file ids"):
        ev.add(np.zeros((1, 2)), [1.7])
    with pytest.raises(ValueError, match="integer file ids"):
        ev.add(np.zeros((1, 2)), ["1"])
    # The largest unsigned id is that id (it was read as -1), beyond the files.
    with pytest.raises(melctl.ShapeError, match="file 18446744073709551615 is beyond"):
        ev.add(np.zeros((1, 2)), np.array([2**64 - 1], dtype=np.uint64))
    ev.add(np.array([[0.2, 0.8]]), np.array([1], dtype=np.uint8))
    # A positive class beyond the classes, or a threshold outside [0, 1], is refused.
    with pytest.raises(melctl.ConfigError, match="positive"):
        ev.report("mean", positive=5)
    for t in (2.0, -1.0, float("nan")):
        with pytest.raises(melctl.ConfigError, match="threshold"):
            ev.report("mean", positive=1, threshold=t)
    # A plain list of probabilities is taken as an array.
    assert melctl.evaluate_files([[0.1, 0.9]], [0], [1])["accuracy"] == 1.0
