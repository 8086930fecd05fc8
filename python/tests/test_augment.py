"""Augmentation in the Loader (issue 38): SpecAugment masks, gain and mixup applied in
the Rust threads, each draw from (seed, epoch, item): the same batches whatever the
threads, bit-identical after a mid-epoch resume, on fixed segments, crops and duration
buckets alike; bad settings are one-line errors naming the field."""

import shutil

import h5py
import numpy as np
import pytest

import melctl
from test_whole import RATE, mixed_partners, tone, write_wav

MASKS = dict(time_masks=2, time_mask_frames=2, freq_masks=2, freq_mask_bins=6)


def batches(loader):
    return [tuple(np.array(a) for a in b) for b in loader]


def same(a, b):
    return len(a) == len(b) and all(
        len(x) == len(y) and all(np.array_equal(p, q) for p, q in zip(x, y)) for x, y in zip(a, b)
    )


def test_masks_zero_whole_bins_and_frames_and_leave_the_rest(h5):
    plain = batches(melctl.Loader(h5, 64, seed=5))
    masked = batches(melctl.Loader(h5, 64, seed=5, augment=melctl.Augment(**MASKS)))
    zeros = 0
    for (x, y), (m, my) in zip(plain, masked):
        assert np.array_equal(y, my)
        changed = m != x
        assert np.all(m[changed] == 0), "a mask writes zeros only"
        for item in changed:
            bins = item.all(axis=1)
            frames = item[~bins].all(axis=0) if (~bins).any() else np.zeros(item.shape[1], bool)
            # Every change is a whole masked bin or a whole masked frame.
            assert np.array_equal(item, bins[:, None] | frames[None, :])
            assert bins.sum() <= 12 and frames.sum() <= 4
        zeros += changed.sum()
    assert zeros > 0


def test_gain_shifts_each_item_by_one_level_within_the_range(h5):
    plain = batches(melctl.Loader(h5, 64, seed=5))
    gained = batches(melctl.Loader(h5, 64, seed=5, augment=melctl.Augment(gain_db=6)))
    levels = []
    for (x, _), (g, _) in zip(plain, gained):
        d = (g.astype(np.float64) - x).reshape(len(x), -1)
        assert np.allclose(d, d[:, :1], atol=1e-3)
        levels += list(d[:, 0])
    assert max(np.abs(levels)) <= 6.0 + 1e-3 and np.std(levels) > 2.0


def test_mixup_gives_soft_labels_and_mixes_values_with_their_weight(h5):
    aug = melctl.Augment(mixup_alpha=0.4)
    classes = len(melctl.open(h5).label_names)
    plain = batches(melctl.Loader(h5, 64, seed=5))
    mixed = batches(melctl.Loader(h5, 64, seed=5, augment=aug))
    checked = 0
    for (x, y), (m, soft) in zip(plain, mixed):
        assert soft.dtype == np.float32 and soft.shape == (len(x), classes)
        assert np.allclose(soft.sum(axis=1), 1.0)
        assert np.all(soft[np.arange(len(y)), y] >= 0)
        for i in range(len(x)):
            w = soft[i, y[i]]
            if w > 0.999:
                continue
            # Some partner j of the batch (of another class, or w is not readable) gives it.
            cands = [j for j in range(len(x)) if y[j] != y[i]]
            assert any(np.allclose(m[i], w * x[i] + (1 - w) * x[j], atol=1e-4) for j in cands)
            checked += 1
    assert checked > 10


def test_augmented_batches_replay_exactly_with_any_threads_and_after_a_resume(h5):
    aug = melctl.Augment(**MASKS, gain_db=3, mixup_alpha=0.3, mixup_prob=0.7)
    make = lambda threads: melctl.Loader(h5, 50, seed=9, epoch=2, threads=threads, augment=aug)
    whole = batches(make(1))
    assert same(whole, batches(make(4)))
    stopped = make(3)
    it = iter(stopped)
    for _ in range(3):
        next(it)
    state = stopped.state_dict()
    assert state["augment"] == repr(aug)
    resumed = make(2)
    resumed.load_state_dict(state)
    assert same(batches(resumed), whole[3:])
    # Another epoch draws anew; another augmentation's state is refused.
    assert not same(batches(melctl.Loader(h5, 50, seed=9, epoch=3, augment=aug)), whole)
    with pytest.raises(ValueError, match="augment"):
        melctl.Loader(h5, 50, seed=9, epoch=2).load_state_dict(state)


def test_bad_settings_are_one_line_errors_naming_the_field(h5):
    cases = [
        (dict(mixup_alpha=0.4, mixup_prob=1.5), "augment.mixup_prob"),
        (dict(mixup_prob=-0.1), "augment.mixup_prob"),
        (dict(mixup_alpha=0.0), "augment.mixup_alpha"),
        (dict(mixup_alpha=float("nan")), "augment.mixup_alpha"),
        (dict(mixup_alpha=1e300), "augment.mixup_alpha"),
        (dict(gain_db=-1.0), "augment.gain_db"),
        (dict(time_masks=-2), "augment.time_masks"),
        (dict(freq_masks=1000), "augment.freq_masks"),
        (dict(time_mask_share=0.0), "augment.time_mask_share"),
        (dict(time_mask_share=1.5), "augment.time_mask_share"),
    ]
    for kwargs, field in cases:
        with pytest.raises(melctl.ConfigError) as e:
            melctl.Augment(**kwargs)
        assert field in str(e.value) and "\n" not in str(e.value), kwargs
    # Widths are checked against the split: leak-4k items are 32 bins × 5 frames.
    for kwargs, field in [
        (dict(time_masks=1, time_mask_frames=6), "augment.time_mask_frames"),
        (dict(freq_masks=1, freq_mask_bins=33), "augment.freq_mask_bins"),
    ]:
        with pytest.raises(melctl.ConfigError) as e:
            melctl.Loader(h5, 8, augment=melctl.Augment(**kwargs))
        assert field in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(melctl.ConfigError, match="augment"):
        melctl.Loader(h5, 8, dtype="float16", augment=melctl.Augment(gain_db=1))
    with pytest.raises(ValueError, match="batch_size: -1"):
        melctl.Loader(h5, -1)


@pytest.fixture(scope="module")
def spread(tmp_path_factory):
    """Whole clips of 0.3–3 s, two classes."""
    root = tmp_path_factory.mktemp("augwhole") / "data"
    rng = np.random.default_rng(4)
    for k in range(40):
        c = k % 2
        n = int(RATE * rng.uniform(0.3, 3.0))
        write_wav(root / "all" / f"c{c}" / f"{k}.wav", tone(n, 300 + 600 * c, seed=k))
    out = root.parent / "out"
    melctl.build(root, out, preset="speech-16k", config={"audio": {"length": "whole"}})
    return out / "all.h5"


@pytest.mark.parametrize("shape", [dict(max_frames=1200), dict(crop_frames=100)])
def test_whole_clips_are_augmented_on_their_real_frames_only(spread, shape):
    aug = melctl.Augment(time_masks=2, time_mask_frames=30, freq_masks=1, freq_mask_bins=10,
                         gain_db=4, mixup_alpha=0.5)
    make = lambda threads: melctl.Loader(spread, 8, seed=2, threads=threads, augment=aug,
                                         normalize=True, **shape)
    a = batches(make(1))
    assert same(a, batches(make(3)))
    for x, soft, lengths in a:
        assert soft.shape == (len(x), 2)
        for item, n in zip(x, lengths):
            assert np.all(item[:, n:] == 0), "padding stays zero"
    it_loader = make(2)
    it = iter(it_loader)
    next(it)
    state = it_loader.state_dict()
    resumed = make(1)
    resumed.load_state_dict(state)
    assert same(batches(resumed), a[1:])


@pytest.mark.parametrize("shape", [None, "f32", "bf16", dict(max_frames=1200),
                                   dict(crop_frames=100)])
def test_a_gain_that_overflows_what_normalising_did_not_is_refused(outputs, spread, shape):
    """Statistics whose normalised values are finite but near float32's largest: a gain on
    top overflows. Found by an attack (helper-24): the batch then held infinities with no
    word, its values judged before the gain was added; now each is judged as stored, mixed
    or not, a one-line error naming the field; f32 and bf16 splits too, given their gain
    in a pass after."""
    if shape is None or isinstance(shape, str):
        path, kw = outputs[shape or "f16"] / "training.h5", {}
    else:
        path, kw = spread, shape
    # Each bin's largest real value normalised to 95% of float32's largest, by a standard
    # deviation whose gain (96 dB / std) passes the up-front check; a gain over ~20 dB
    # then overflows there.
    top = None
    for b in batches(melctl.Loader(path, 8, seed=1, **kw)):
        lengths = b[2] if len(b) > 2 else [b[0].shape[-1]] * len(b[0])
        for item, n in zip(b[0], lengths):
            m = item.reshape(-1, *item.shape[-2:])[..., :n].max(axis=(0, 2))
            top = m if top is None else np.maximum(top, m)
    std = 1.2e-36
    norm = ([float(t) - 0.95 * 3.4028235e38 * std for t in top], [std] * len(top))
    plain = batches(melctl.Loader(path, 8, seed=1, normalize=norm, **kw))
    assert all(np.isfinite(b[0]).all() for b in plain), "finite without the gain"
    for aug in (melctl.Augment(gain_db=96.0), melctl.Augment(gain_db=96.0, mixup_alpha=0.5),
                melctl.Augment(gain_db=96.0, mixup_alpha=0.5, mixup_prob=0.5, **MASKS)):
        with pytest.raises(melctl.ConfigError, match="normalize: .*not finite") as e:
            batches(melctl.Loader(path, 8, seed=1, normalize=norm, augment=aug, **kw))
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("shape", [dict(max_frames=1200), dict(crop_frames=100)])
def test_a_gain_alone_adds_one_level_to_each_whole_clips_real_values_bit_for_bit(spread, shape):
    """Unnormalised, a gain is one float32 add of the item's level to each real value (the
    padding stays zero): the same bits as the plain batch's values plus that level."""
    make = lambda aug: melctl.Loader(spread, 8, seed=3, augment=aug, **shape)
    plain, gained = batches(make(None)), batches(make(melctl.Augment(gain_db=6)))
    assert len(plain) == len(gained) > 0
    levels = []
    for (x, y, n), (g, gy, gn) in zip(plain, gained):
        assert np.array_equal(y, gy) and np.array_equal(n, gn)
        for xi, gi, k in zip(x, g, n):
            assert np.all(gi[:, k:] == 0), "padding stays zero"
            real, shifted = xi[:, :k], gi[:, :k]
            d, counts = np.unique(shifted - real, return_counts=True)
            level = next((v for v in d[np.argsort(-counts)][:4]
                          if np.array_equal(real + v, shifted)), None)
            assert level is not None, "no one float32 level gives the gained bits"
            levels.append(float(level))
    assert max(map(abs, levels)) <= 6.0 + 1e-4 and np.std(levels) > 1.0


@pytest.mark.parametrize("shape", [dict(max_frames=3000), dict(crop_frames=200)])
def test_whole_clips_mixed_a_few_frames_at_a_time_equal_the_plain_batches_mixed(spread, shape):
    """The loader mixes whole clips while it reads them, a block of frames of each pair at a
    time: each item mixed with another class is w·x_i + (1 − w)·x_j of the plain loader's
    items over its whole width (padding included), its length the longer one, normalised
    or not; partners are mutual but for one three-cycle in a batch of odd size."""
    for normalize in (False, True):
        make = lambda aug: melctl.Loader(spread, 9, seed=6, augment=aug, normalize=normalize,
                                         **shape)
        plain = batches(make(None))
        mixed = batches(make(melctl.Augment(mixup_alpha=0.5)))
        checked = 0
        for (x, y, n), (m, soft, mn) in zip(plain, mixed):
            partner = {}
            for i in range(len(x)):
                w = soft[i, y[i]]
                if w > 0.999:
                    continue  # not mixed, or with its own class (w is not readable)
                found = [j for j in range(len(x)) if j != i and y[j] != y[i]
                         and np.allclose(m[i], w * x[i] + (1 - w) * x[j], atol=1e-5)]
                assert found, f"item {i}: no partner gives its values"
                partner[i] = found[0]
                assert mn[i] == max(n[i], n[found[0]])
                checked += 1
            cycles = sum(1 for i, j in partner.items() if partner.get(j) not in (i, None))
            assert cycles <= 3, partner
        assert checked > 10


def test_what_the_attack_round_found_is_refused_or_honoured(h5, spread):
    """Issue 38's attack round: each finding now a one-line error or honoured."""
    # A batch_size far above the items is one batch of them (it aborted the process on
    # buckets), and memory_bound is a number, never an overflow panic.
    loader = melctl.Loader(spread, 2**62, max_frames=600)
    assert sum(len(b[1]) for b in loader) == len(melctl.open(spread))
    assert 0 < loader.memory_bound < 2**40
    with pytest.raises(melctl.ConfigError, match="prefetch"):
        melctl.Loader(h5, 4, prefetch=2**62)
    with pytest.raises(ValueError, match="threads: 0"):
        melctl.Loader(h5, 4, threads=0)
    # Mixup never pairs an item with itself: with α huge every item of every batch moves.
    plain = batches(melctl.Loader(h5, 2, seed=11))
    mixed = batches(melctl.Loader(h5, 2, seed=11, augment=melctl.Augment(mixup_alpha=1e3)))
    for (x, _), (m, _) in zip(plain, mixed):
        if len(x) == 2:
            assert not np.array_equal(m[0], x[0]) and not np.array_equal(m[1], x[1])
    # A gain that normalisation would blow past float32 is refused up front.
    n = melctl.open(h5).clip_shape[-2]
    with pytest.raises(melctl.ConfigError, match="augment.gain_db"):
        melctl.Loader(h5, 8, normalize=(np.zeros(n), np.full(n, 2e-37)),
                      augment=melctl.Augment(gain_db=96))
    # mixup_prob means nothing without mixup_alpha; widths without masks ask for nothing.
    with pytest.raises(melctl.ConfigError, match="mixup_alpha"):
        melctl.Augment(mixup_prob=0.5)
    melctl.Loader(h5, 8, augment=melctl.Augment(time_mask_frames=99, freq_mask_bins=99))


def test_a_gain_in_db_is_refused_on_a_split_of_other_log_values(tmp_path, demo_data):
    out = tmp_path / "ln"
    melctl.build(demo_data, out, config={"audio": {"clip_seconds": 1.0}, "log": {"kind": "ln"}},
                 splits=["training"])
    with pytest.raises(melctl.ConfigError, match="augment.gain_db.*ln"):
        melctl.Loader(out / "training.h5", 8, augment=melctl.Augment(gain_db=3))
    melctl.Loader(out / "training.h5", 8, augment=melctl.Augment(time_masks=1, time_mask_frames=2))


@pytest.fixture(scope="module")
def speech_fixed(spread):
    """The clips of ``spread`` built at one length (speech-16k: 80 bins × 101 frames)."""
    data = spread.parent.parent / "data"
    out = spread.parent.parent / "fixed"
    melctl.build(data, out, preset="speech-16k")
    return out / "all.h5"


FIXED_SHAPES = [("h5", {}), ("h5", dict(crop_frames=3)), ("h5", dict(unit="clip")),
                ("speech", {}), ("speech", dict(crop_frames=50))]


@pytest.mark.parametrize("which, shape", FIXED_SHAPES)
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("gain", [0.0, 5.0])
def test_fixed_items_mixed_in_one_pass_are_the_plain_items_mixed_bit_for_bit(
        h5, speech_fixed, which, shape, normalize, gain):
    """A mixed pair (or three-cycle) of f16 items of a fixed-length split in a map is
    widened, normalised, given its gains and mixed in one pass (segments of 5 frames,
    whole clips of segments, speech items of 101 frames, and crops of each): every mixed
    item is exactly ``w·x_i + (1 − w)·x_j`` in float32 of the items the loader gives
    without mixup (with the same gains and crops)."""
    path = {"h5": h5, "speech": speech_fixed}[which]
    for batch in (9, 64):
        make = lambda aug: melctl.Loader(path, batch_size=batch, seed=4, normalize=normalize,
                                         augment=aug, **shape)
        plain = list(make(melctl.Augment(gain_db=gain) if gain else None))
        mixed = list(make(melctl.Augment(mixup_alpha=0.5, gain_db=gain)))
        assert len(plain) == len(mixed)
        checked = sum(len(list(mixed_partners(x, y, m, soft)))
                      for (x, y, *_), (m, soft, *_) in zip(plain, mixed))
        assert checked > 5


@pytest.mark.parametrize("pattern", [0x7C00, 0xFC00, 0xFE01])
@pytest.mark.parametrize("where", ["body", "last"])
def test_a_value_not_finite_in_a_mixed_fixed_item_is_refused_naming_it(
        h5, tmp_path, pattern, where):
    """Items mixed in one pass are judged each as reading it alone is: an infinity or a
    NaN of either sign stored in a segment (its first row, or its last value: a run's
    tail) is the one-line error naming it, whole or cropped, normalised or not;
    statistics that overflow float32 are the normalize error."""
    path = tmp_path / "training.h5"
    shutil.copy(h5, path)
    with h5py.File(path, "r+") as f:
        clip = f["mel"].shape[0] // 2
        item = f["mel"][clip].view(np.uint16)
        seg = (1, 2)
        if where == "body":
            item[seg][0, 1] = pattern
        else:
            item[seg][-1, -1] = pattern
        f["mel"][clip] = item.view(np.float16)
    mixup = melctl.Augment(mixup_alpha=0.5, gain_db=2.0)
    for shape in ({}, dict(crop_frames=5)):
        for normalize in (False, True):
            with pytest.raises(melctl.DatasetError) as e:
                for _ in melctl.Loader(path, 16, seed=3, augment=mixup, normalize=normalize,
                                       **shape):
                    pass
            assert f"clip {clip} segment {seg[0] * 3 + seg[1]} holds a value that is not finite" \
                in str(e.value), str(e.value)
            assert len(str(e.value).splitlines()) == 1
    n = melctl.open(h5).clip_shape[-2]
    with pytest.raises(melctl.ConfigError, match="normalize"):
        for _ in melctl.Loader(h5, 16, augment=melctl.Augment(mixup_alpha=0.5),
                               normalize=(np.zeros(n), np.full(n, 1e-38))):
            pass


@pytest.mark.parametrize("which, shape", [("h5", {}), ("speech", dict(crop_frames=100)),
                                          ("spread", dict(crop_frames=100)),
                                          ("spread", dict(max_frames=1200))])
def test_an_item_left_unmixed_is_its_plain_bits(h5, speech_fixed, spread, tmp_path, which, shape):
    """With ``mixup_prob`` below 1, an item left unmixed is the item without mixup bit for
    bit, a stored −0 included, whatever its partner holds (``1·x + 0·y`` would turn the −0
    into +0 where y is positive): fixed-length items and crops, whole-clip crops and
    buckets, read in one pass with their partner."""
    src = {"h5": h5, "speech": speech_fixed, "spread": spread}[which]
    path = tmp_path / "signed.h5"
    shutil.copy(src, path)
    with h5py.File(path, "r+") as f:
        mel = f["mel"][...]
        even = np.arange(mel.shape[0]) % 2 == 0
        mel[even, ..., 0], mel[~even, ..., 0] = -0.0, 2.0
        mel[~even, ..., 1], mel[even, ..., 1] = -0.0, 2.0
        f["mel"][...] = mel
    make = lambda aug: melctl.Loader(path, 64, seed=3, augment=aug, **shape)
    plain = [np.array(b[0]) for b in make(None)]
    labels = [np.array(b[1]) for b in make(None)]
    checked = 0
    for x, y, b in zip(plain, labels, make(melctl.Augment(mixup_alpha=0.5, mixup_prob=0.5))):
        m, soft = np.asarray(b[0]), b[1]
        for i in range(len(x)):
            # Unmixed: its soft label one-hot and its values equal (a mixed item equals
            # its plain values only with a weight of 1).
            if soft[i, y[i]] == 1.0 and np.array_equal(m[i], x[i]):
                assert np.array_equal(m[i].view(np.uint32), x[i].view(np.uint32)), f"item {i}"
                checked += 1
    assert checked >= 5
