"""The Loader behaves as torch users expect (issue 38): ``iter()`` starts an epoch as a
``DataLoader`` does (peeking costs nothing), ``load_state_dict`` resumes mid-epoch once
(torchdata's ``StatefulDataLoader``), a Loader pickles by path, options and position and
reads the same batches in spawn and forkserver children, and the runtime objects carry
their documentation (what ``help()`` shows)."""

import inspect
import multiprocessing as mp
import pickle

import numpy as np
import pytest

import melctl


def labels(loader):
    return [b[1].tolist() for b in loader]


def test_iter_starts_the_epoch_and_a_finished_pass_moves_to_the_next(h5):
    loader = melctl.Loader(h5, 30, seed=3)
    first = next(iter(loader))[1].tolist()
    epoch0 = labels(loader)
    assert epoch0[0] == first, "a peek cost the epoch nothing"
    assert loader.epoch == 1
    epoch1 = labels(loader)
    assert epoch1 != epoch0 and sorted(sum(epoch1, [])) == sorted(sum(epoch0, []))
    assert labels(melctl.Loader(h5, 30, seed=3, epoch=1)) == epoch1
    # Left mid-epoch: the next iter() starts that epoch again.
    it = iter(loader)
    next(it), next(it)
    assert loader.epoch == 2 and loader.state_dict()["batch"] == 2
    assert labels(loader) == labels(melctl.Loader(h5, 30, seed=3, epoch=2))


def test_load_state_dict_resumes_once_then_epochs_start_from_their_first_batch(h5):
    a = melctl.Loader(h5, 30, seed=3)
    it = iter(a)
    next(it), next(it)
    state = a.state_dict()
    rest = labels(it)
    b = melctl.Loader(h5, 30, seed=3)
    b.load_state_dict(state)
    assert labels(b) == rest
    assert b.epoch == 1 and labels(b) == labels(melctl.Loader(h5, 30, seed=3, epoch=1))
    # A resume that is peeked at and left still resumes at the saved batch... once.
    c = melctl.Loader(h5, 30, seed=3)
    c.load_state_dict(state)
    assert labels(c)[0] == rest[0]


def read_in_child(loader, queue):
    queue.put(labels(loader))


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_loader_pickles_with_its_options_and_position(h5, method):
    aug = melctl.Augment(time_masks=1, time_mask_frames=2, gain_db=2)
    loader = melctl.Loader(h5, 25, seed=8, epoch=4, shuffle="uniform", augment=aug, threads=2)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    resumed = melctl.Loader(h5, 25, seed=8, epoch=4, augment=aug)
    resumed.load_state_dict(state)
    copy = pickle.loads(pickle.dumps(resumed))
    assert copy.state_dict() == state and copy.item_shape == loader.item_shape
    want = labels(it)
    assert labels(copy) == want
    ctx = mp.get_context(method)
    queue = ctx.Queue()
    again = melctl.Loader(h5, 25, seed=8, epoch=4, augment=aug)
    again.load_state_dict(state)
    child = ctx.Process(target=read_in_child, args=(again, queue))
    child.start()
    got = queue.get(timeout=120)
    child.join(timeout=60)
    assert child.exitcode == 0 and got == want
    assert pickle.loads(pickle.dumps(aug)) == aug


RUNTIME = ["Loader", "Split", "Extractor", "FileEvaluator", "Augment", "Batches", "open",
           "build", "merge", "verify", "evaluate_files"]


@pytest.mark.parametrize("name", RUNTIME)
def test_runtime_objects_carry_their_documentation(name):
    doc = inspect.getdoc(getattr(melctl, name)) or ""
    assert len(doc.splitlines()) >= 3, f"help(melctl.{name}) shows: {doc!r}"


def test_the_loaders_help_names_every_argument():
    doc = melctl.Loader.__doc__
    params = inspect.signature(melctl.Loader).parameters
    assert len(params) >= 17
    for name in params:
        assert f"``{name}" in doc or f"{name}=" in doc, name
    for method in ["state_dict", "load_state_dict", "set_epoch", "plan", "padding_share"]:
        assert inspect.getdoc(getattr(melctl.Loader, method)), method


@pytest.mark.parametrize("build", ["f16", "f32", "bf16"])
def test_extractor_from_split_extracts_with_the_stored_settings(outputs, demo_data, build):
    """Issue 38: the Extractor's settings come from the split, dtype included: a file
    gives exactly its stored clip, whatever the build's dtype."""
    s = melctl.open(outputs[build] / "training.h5")
    ex = melctl.Extractor.from_split(s, backend="cpu")
    assert ex.clip_shape == list(s.clip_shape)
    for i in (0, 7, len(s) - 1):
        assert np.array_equal(ex.file(demo_data / s.paths[i]), s[i]), (build, s.paths[i])
    # The preset's defaults would not do: leak-4k's clips are 20 s, these 1 s.
    assert melctl.Extractor("leak-4k").clip_shape != ex.clip_shape
