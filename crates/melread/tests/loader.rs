//! Batches: determinism per seed, every item exactly once per epoch (shards a
//! partition), resumption equal to continuing, drop-last, the memory bound, and the
//! values themselves.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::build_leak;
use melkit::Dtype;
use melread::{ItemId, Loader, LoaderOptions, Output, Shuffle, Split, Unit, Values};

fn split(dir: &std::path::Path, dtype: Dtype, clips: usize) -> Arc<Split> {
    let out = build_leak(dir, dtype, &[("training", clips)]);
    Arc::new(Split::open_in(out, "training").unwrap())
}

fn opts(shuffle: Shuffle, batch: usize) -> LoaderOptions {
    LoaderOptions {
        batch_size: batch,
        shuffle,
        seed: 11,
        workers: 3,
        prefetch: 2,
        ..LoaderOptions::default()
    }
}

/// Every batch's item ids, read (not planned).
fn read_ids(loader: &Loader, epoch: u64, from: usize) -> Vec<Vec<ItemId>> {
    loader
        .resume(epoch, from)
        .map(|b| b.unwrap().ids().to_vec())
        .collect()
}

const SHUFFLES: [Shuffle; 3] = [
    Shuffle::None,
    Shuffle::Uniform,
    Shuffle::Buffered { buffer: 300 },
];

#[test]
fn seeded_orders_are_deterministic_and_resume_where_they_stopped() {
    let t = tempfile::tempdir().unwrap();
    let s = split(t.path(), Dtype::F16, 7);
    for shuffle in SHUFFLES {
        let loader = Loader::new(s.clone(), opts(shuffle, 100)).unwrap();
        let a = read_ids(&loader, 3, 0);
        assert_eq!(a.len(), loader.batches_per_epoch());
        assert_eq!(
            a,
            read_ids(&loader, 3, 0),
            "{shuffle:?}: same seed, same epoch"
        );
        assert_eq!(
            a,
            loader.plan(3, 0).collect::<Vec<_>>(),
            "{shuffle:?}: the plan is what is read"
        );
        for from in [1, 5, a.len() - 1, a.len()] {
            assert_eq!(
                read_ids(&loader, 3, from),
                a[from..],
                "{shuffle:?}: resume at {from}"
            );
        }
        if shuffle != Shuffle::None {
            assert_ne!(a, read_ids(&loader, 4, 0), "{shuffle:?}: epochs differ");
            let other = Loader::new(
                s.clone(),
                LoaderOptions {
                    seed: 12,
                    ..opts(shuffle, 100)
                },
            )
            .unwrap();
            assert_ne!(a, read_ids(&other, 3, 0), "{shuffle:?}: seeds differ");
        }
        // Resuming part-way through an epoch that was being read gives the same rest.
        let mut epoch = loader.epoch(3);
        let head: Vec<_> = epoch
            .by_ref()
            .take(4)
            .map(|b| b.unwrap().ids().to_vec())
            .collect();
        assert_eq!(epoch.next_index(), 4);
        drop(epoch);
        let mut joined = head;
        joined.extend(read_ids(&loader, 3, 4));
        assert_eq!(joined, a);
    }
}

#[test]
fn an_epoch_is_every_segment_once_and_shards_partition_it() {
    let t = tempfile::tempdir().unwrap();
    let s = split(t.path(), Dtype::F16, 5);
    let all: Vec<ItemId> = (0..5)
        .flat_map(|clip| (0..237).map(move |segment| ItemId { clip, segment }))
        .collect();
    for shuffle in SHUFFLES {
        for world in [1, 2, 3] {
            let mut seen = Vec::new();
            let mut per_rank = Vec::new();
            for rank in 0..world {
                let loader = Loader::new(
                    s.clone(),
                    LoaderOptions {
                        rank,
                        world,
                        ..opts(shuffle, 64)
                    },
                )
                .unwrap();
                let ids: Vec<ItemId> = read_ids(&loader, 0, 0).concat();
                assert_eq!(ids.len(), loader.items_per_epoch());
                per_rank.push(ids.len());
                seen.extend(ids);
            }
            // Every rank gets as many items (and batches) as the others, as torch's
            // DistributedSampler gives: a rank with a batch fewer leaves the others in
            // DDP's last all-reduce for ever. Every item is seen; fewer than `world`
            // (the padding) twice.
            assert!(per_rank.iter().all(|&n| n == per_rank[0]), "{per_rank:?}");
            let unique: HashSet<_> = seen.iter().copied().collect();
            let padding = per_rank[0] * world - all.len();
            assert!(padding < world, "{padding}");
            assert_eq!(
                unique.len(),
                seen.len() - padding,
                "{shuffle:?} world {world}: an item twice beyond the padding"
            );
            let mut unique: Vec<_> = unique.into_iter().collect();
            unique.sort();
            assert_eq!(unique, all, "{shuffle:?} world {world}: not every item");

            // drop_last: full batches only, the same count on every rank.
            let counts: Vec<usize> = (0..world)
                .map(|rank| {
                    let loader = Loader::new(
                        s.clone(),
                        LoaderOptions {
                            rank,
                            world,
                            drop_last: true,
                            ..opts(shuffle, 64)
                        },
                    )
                    .unwrap();
                    let batches: Vec<_> = loader.epoch(1).map(|b| b.unwrap().len()).collect();
                    assert!(batches.iter().all(|&n| n == 64));
                    batches.len()
                })
                .collect();
            assert!(
                counts.iter().all(|&c| c == 5 * 237 / world / 64),
                "{counts:?}"
            );
        }
    }
}

#[test]
fn batches_hold_the_split_values_labels_and_normalisation() {
    let t = tempfile::tempdir().unwrap();
    let s = split(t.path(), Dtype::F16, 6);
    let stats = s.stats(2).unwrap();
    let (shift, scale) = stats.affine();
    for normalize in [false, true] {
        let loader = Loader::new(
            s.clone(),
            LoaderOptions {
                normalize: normalize.then(|| stats.clone()),
                ..opts(Shuffle::Uniform, 500)
            },
        )
        .unwrap();
        for batch in loader.epoch(0) {
            let batch = batch.unwrap();
            let view = batch.view().unwrap();
            assert_eq!(&view.shape()[1..], &[32, 5]);
            for (k, id) in batch.ids().iter().enumerate().step_by(37) {
                let mut want = s.segment(id.clip, id.segment).unwrap();
                if normalize {
                    for m in 0..32 {
                        want.row_mut(m).mapv_inplace(|v| (v - shift[m]) * scale[m]);
                    }
                }
                assert_eq!(view.index_axis(ndarray::Axis(0), k), want.into_dyn());
                assert_eq!(batch.labels()[k], s.labels()[id.clip]);
            }
        }
    }
    // Normalised training data has mean ~0 and deviation ~1 in each bin.
    let loader = Loader::new(
        s.clone(),
        LoaderOptions {
            normalize: Some(stats.clone()),
            ..opts(Shuffle::None, 6 * 237)
        },
    )
    .unwrap();
    let b = loader.epoch(0).next().unwrap().unwrap();
    let x = b.view().unwrap();
    for m in 0..32 {
        let bin = x.index_axis(ndarray::Axis(1), m);
        let mean = bin.iter().map(|&v| v as f64).sum::<f64>() / bin.len() as f64;
        let var = bin.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / bin.len() as f64;
        assert!(
            mean.abs() < 1e-4 && (var.sqrt() - 1.0).abs() < 1e-4,
            "bin {m}: {mean} {var}"
        );
    }
    // Whole clips, and f16 kept as stored.
    let loader = Loader::new(
        s.clone(),
        LoaderOptions {
            unit: Unit::Clip,
            output: Output::Stored,
            ..opts(Shuffle::Uniform, 4)
        },
    )
    .unwrap();
    let batches: Vec<_> = loader.epoch(0).map(|b| b.unwrap()).collect();
    assert_eq!(
        batches.iter().map(|b| b.len()).collect::<Vec<_>>(),
        vec![4, 2]
    );
    let b = &batches[1];
    assert_eq!(b.shape(), &[2, 79, 3, 32, 5]);
    let Values::F16(v) = b.values() else {
        panic!("f16 kept")
    };
    let mut r = s.reader();
    let per = s.values_per_clip();
    let stored: Vec<u8> = v[per..].iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(stored, r.raw(b.ids()[1].clip, None).unwrap());
    let clip = s.clip(b.ids()[1].clip).unwrap();
    assert_eq!(b.to_f32().index_axis(ndarray::Axis(0), 1), clip);
    // Normalising f16 kept as f16 is refused (it belongs on the device).
    let e = Loader::new(
        s.clone(),
        LoaderOptions {
            output: Output::Stored,
            normalize: Some(stats),
            ..opts(Shuffle::Uniform, 4)
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("normalize"), "{e}");
}

#[test]
fn the_loader_owns_at_most_prefetch_buffers() {
    let t = tempfile::tempdir().unwrap();
    let s = split(t.path(), Dtype::F16, 4);
    for prefetch in [1, 2, 5] {
        let loader = Loader::new(
            s.clone(),
            LoaderOptions {
                prefetch,
                workers: 4,
                ..opts(Shuffle::Uniform, 16)
            },
        )
        .unwrap();
        assert_eq!(loader.batches_per_epoch(), (4 * 237usize).div_ceil(16));
        // A consumer that drops each batch before the next: buffers are recycled.
        let mut epoch = loader.epoch(0);
        let mut n = 0;
        for b in epoch.by_ref() {
            b.unwrap();
            n += 1;
        }
        let stats = epoch.buffer_stats();
        assert_eq!(n, loader.batches_per_epoch());
        assert_eq!(stats.bound, prefetch + 2);
        assert!(stats.max_live <= prefetch + 1, "{stats:?}");
        assert!(stats.allocated <= prefetch + 1, "{stats:?}");
        // A consumer that keeps every batch: no deadlock; the ones it keeps are its own.
        let mut epoch = loader.epoch(1);
        let kept: Vec<_> = epoch.by_ref().map(|b| b.unwrap()).collect();
        assert_eq!(kept.len(), loader.batches_per_epoch());
        let stats = epoch.buffer_stats();
        assert!(stats.max_live <= prefetch + 1, "{stats:?}");
        // One buffer per batch kept, plus at most the loader's own at the end.
        assert!(
            stats.allocated >= kept.len() && stats.allocated <= kept.len() + prefetch,
            "{stats:?}"
        );
        drop(kept);
        // Dropping the epoch half-way stops and joins its workers.
        let mut epoch = loader.epoch(2);
        epoch.next().unwrap().unwrap();
        drop(epoch);
    }
    assert_eq!(
        Loader::new(s.clone(), opts(Shuffle::Uniform, 16))
            .unwrap()
            .memory_bound(),
        4 * 16 * (32 * 5 * 4 + 16)
    );
}

/// An epoch starts with the buffers the loader's previous epoch left (no new memory to
/// fault in), its last batch too when the caller frees that after the epoch ended, at
/// most `prefetch + 2` in all; and the batches it fills in them are a fresh loader's:
/// nothing of the previous epoch's values is left in them.
#[test]
fn an_epoch_reuses_the_buffers_the_previous_one_left() {
    let t = tempfile::tempdir().unwrap();
    let s = split(t.path(), Dtype::F16, 3);
    let prefetch = 2;
    let o = LoaderOptions {
        prefetch,
        ..opts(Shuffle::Uniform, 40)
    };
    let loader = Loader::new(s.clone(), o.clone()).unwrap();
    // Reads an epoch as a Python loop does: each batch dropped when the next arrives, the
    // last one freed only after the epoch has ended.
    let read = |epoch: u64| {
        let mut e = loader.epoch(epoch);
        let (mut values, mut last) = (Vec::new(), None);
        for b in e.by_ref() {
            let b = b.unwrap();
            values.push(b.to_f32().into_raw_vec_and_offset().0);
            last = Some(b);
        }
        let stats = e.buffer_stats();
        drop(e);
        drop(last);
        (values, stats)
    };
    let (_, first) = read(0);
    assert_eq!(first.reused, 0, "{first:?}");
    assert!(first.allocated >= 1, "{first:?}");
    let mut before = first;
    for epoch in 1..8 {
        let (got, stats) = read(epoch);
        assert!(
            stats.reused >= (before.reused + before.allocated).min(prefetch + 2),
            "epoch {epoch} starts with every buffer the last one had: {stats:?} after {before:?}"
        );
        // Freed only once the next batch is out, a buffer is still the next batch's: an
        // epoch allocates only while the loader has fewer than `prefetch + 2` buffers.
        assert!(stats.reused + stats.allocated <= prefetch + 2, "{stats:?}");
        if before.reused + before.allocated == prefetch + 2 {
            assert_eq!(stats.allocated, 0, "epoch {epoch}: {stats:?}");
        }
        assert!(stats.max_live <= stats.bound, "{stats:?}");
        let fresh: Vec<Vec<f32>> = Loader::new(s.clone(), o.clone())
            .unwrap()
            .epoch(epoch)
            .map(|b| b.unwrap().to_f32().into_raw_vec_and_offset().0)
            .collect();
        assert_eq!(got, fresh, "epoch {epoch}");
        before = stats;
    }
    assert_eq!(before.allocated, 0, "{before:?}");
}

#[test]
fn bad_options_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let s = split(t.path(), Dtype::F16, 1);
    let bad = |o: LoaderOptions, field: &str| {
        let e = Loader::new(s.clone(), o).unwrap_err().to_string();
        assert!(e.contains(field), "{e}");
    };
    bad(
        LoaderOptions {
            batch_size: 0,
            ..LoaderOptions::default()
        },
        "batch_size",
    );
    bad(
        LoaderOptions {
            workers: 0,
            ..LoaderOptions::default()
        },
        "workers",
    );
    bad(
        LoaderOptions {
            prefetch: 0,
            ..LoaderOptions::default()
        },
        "prefetch",
    );
    bad(
        LoaderOptions {
            rank: 2,
            world: 2,
            ..LoaderOptions::default()
        },
        "rank",
    );
    bad(
        LoaderOptions {
            shuffle: Shuffle::Buffered { buffer: 0 },
            ..LoaderOptions::default()
        },
        "shuffle.buffer",
    );
    // A batch size far above the epoch's items allocates for the items there are (one
    // clip here): once it was refused, and on buckets it aborted the process.
    let huge = Loader::new(
        s.clone(),
        LoaderOptions {
            unit: Unit::Clip,
            batch_size: usize::MAX,
            prefetch: 3,
            ..LoaderOptions::default()
        },
    )
    .unwrap();
    assert_eq!(huge.memory_bound(), 5 * (79 * 3 * 32 * 5 * 4 + 16));
    assert_eq!(huge.epoch(0).next().unwrap().unwrap().len(), 1);
    bad(
        LoaderOptions {
            prefetch: usize::MAX,
            ..LoaderOptions::default()
        },
        "prefetch",
    );
    // Either figure's count, named as it is (a std too long once read "statistics for
    // 32 mel bins; the split has 32").
    let mut wrong = s.stats(1).unwrap();
    wrong.mean.pop();
    bad(
        LoaderOptions {
            normalize: Some(wrong),
            ..LoaderOptions::default()
        },
        "statistics of 31 means and 32 standard deviations; the split has 32 mel bins",
    );
    let mut wrong = s.stats(1).unwrap();
    wrong.std.push(1.0);
    bad(
        LoaderOptions {
            normalize: Some(wrong),
            ..LoaderOptions::default()
        },
        "statistics of 32 means and 33 standard deviations; the split has 32 mel bins",
    );
}

#[cfg(feature = "candle")]
#[test]
fn batches_become_candle_tensors() {
    use candle_core::{DType, Device};
    use melread::TensorFloat;
    let t = tempfile::tempdir().unwrap();
    let s = split(t.path(), Dtype::Bf16, 2);
    let loader = Loader::new(
        s.clone(),
        LoaderOptions {
            output: Output::Stored,
            ..opts(Shuffle::Uniform, 50)
        },
    )
    .unwrap();
    let b = loader.epoch(0).next().unwrap().unwrap();
    let (x, y) = b.to_tensors(&Device::Cpu, TensorFloat::Keep).unwrap();
    assert_eq!((x.dims(), x.dtype()), (&[50, 32, 5][..], DType::BF16));
    assert_eq!((y.dims(), y.dtype()), (&[50][..], DType::U32));
    let (x32, _) = b.to_tensors(&Device::Cpu, TensorFloat::F32).unwrap();
    assert_eq!(x32.dtype(), DType::F32);
    let want = b.to_f32();
    let got: Vec<f32> = x32.flatten_all().unwrap().to_vec1().unwrap();
    assert_eq!(got, want.iter().copied().collect::<Vec<_>>());
    assert_eq!(
        y.to_vec1::<u32>().unwrap(),
        b.labels().iter().map(|&l| l as u32).collect::<Vec<_>>()
    );
    // Normalising on the device equals normalising in the loader.
    let stats = s.stats(1).unwrap();
    let on_device: Vec<f32> = melread::tensor::normalize(&x, &stats)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let f32_loader = Loader::new(
        s.clone(),
        LoaderOptions {
            normalize: Some(stats),
            ..opts(Shuffle::Uniform, 50)
        },
    )
    .unwrap();
    let nb = f32_loader.epoch(0).next().unwrap().unwrap();
    let in_loader: Vec<f32> = nb.view().unwrap().iter().copied().collect();
    for (a, b) in on_device.iter().zip(&in_loader) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{a} {b}");
    }
    // into_tensors moves an f32 buffer.
    let (moved, _) = nb.into_tensors(&Device::Cpu, TensorFloat::F32).unwrap();
    assert_eq!(
        moved.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        in_loader
    );
}

#[test]
fn polling_with_a_timeout_hands_out_the_same_batches_as_waiting() {
    let t = tempfile::tempdir().unwrap();
    let split = split(t.path(), Dtype::F16, 24);
    let loader = Loader::new(split, opts(Shuffle::Uniform, 50)).unwrap();
    let waited = read_ids(&loader, 2, 0);
    let mut epoch = loader.epoch(2);
    let mut polled = Vec::new();
    loop {
        // A zero timeout answers at once: Pending until a worker has filled the batch.
        match epoch.next_within(std::time::Duration::ZERO) {
            melread::Waited::Pending => std::thread::yield_now(),
            melread::Waited::Ready(Some(b)) => polled.push(b.unwrap().ids().to_vec()),
            melread::Waited::Ready(None) => break,
        }
    }
    assert_eq!(polled, waited);
    assert!(polled.len() > 1);
    assert!(matches!(
        epoch.next_within(std::time::Duration::ZERO),
        melread::Waited::Ready(None)
    ));
}

/// A loader of `crop`-frame windows of `s`, uniformly shuffled in batches of 64.
fn cropping(s: &Arc<Split>, workers: usize, crop: usize, unit: Unit, output: Output) -> Loader {
    Loader::new(
        s.clone(),
        LoaderOptions {
            crop_frames: Some(crop),
            workers,
            unit,
            output,
            ..opts(Shuffle::Uniform, 64)
        },
    )
    .unwrap()
}

/// Random crops (issue 37): each item a window of `crop_frames` at an offset drawn from
/// (seed, epoch, item), the same whatever the workers and on a resume, new each epoch.
#[test]
fn crops_are_windows_drawn_per_epoch_and_item_the_same_with_any_workers_and_on_resume() {
    let t = tempfile::tempdir().unwrap();
    let s = split(t.path(), Dtype::F16, 6);
    let make = |workers, crop, unit, output| cropping(&s, workers, crop, unit, output);
    let read = |l: &Loader, epoch: u64, from: usize| -> Vec<(Vec<ItemId>, Vec<usize>, Vec<f32>)> {
        l.resume(epoch, from)
            .map(|b| {
                let b = b.unwrap();
                (
                    b.ids().to_vec(),
                    b.offsets().to_vec(),
                    b.to_f32().into_raw_vec_and_offset().0,
                )
            })
            .collect()
    };
    let one = make(1, 3, Unit::Segment, Output::F32);
    assert_eq!(one.item_shape(), &[32, 3]);
    let a = read(&one, 0, 0);
    assert_eq!(
        a,
        read(&make(4, 3, Unit::Segment, Output::F32), 0, 0),
        "workers change nothing"
    );
    assert_eq!(read(&one, 0, 3), a[3..], "a resume reads the same crops");
    let mut seen = HashSet::new();
    for (ids, offsets, values) in &a {
        for (k, (id, &at)) in ids.iter().zip(offsets).enumerate() {
            seen.insert(at);
            let whole = s.segment(id.clip, id.segment).unwrap();
            let want = whole.slice(ndarray::s![.., at..at + 3]);
            let got =
                ndarray::ArrayView2::from_shape((32, 3), &values[k * 96..(k + 1) * 96]).unwrap();
            assert_eq!(got, want, "{id:?} at {at}");
        }
    }
    assert_eq!(
        seen,
        HashSet::from([0, 1, 2]),
        "every offset that fits is drawn"
    );
    let offsets_of =
        |r: &[(Vec<ItemId>, Vec<usize>, Vec<f32>)]| -> std::collections::BTreeMap<ItemId, usize> {
            r.iter()
                .flat_map(|(ids, o, _)| ids.iter().copied().zip(o.iter().copied()))
                .collect()
        };
    let (e0, e1) = (offsets_of(&a), offsets_of(&read(&one, 1, 0)));
    let moved = e0.iter().filter(|(id, at)| e1[id] != **at).count();
    assert!(
        moved > e0.len() / 2,
        "a new epoch draws new crops: {moved} of {}",
        e0.len()
    );
    // A crop of every frame is the item itself; one longer, or of none, is refused.
    let full = read(&make(2, 5, Unit::Segment, Output::F32), 0, 0);
    assert!(full.iter().all(|(_, o, _)| o.iter().all(|&x| x == 0)));
    let plain = Loader::new(s.clone(), opts(Shuffle::Uniform, 64)).unwrap();
    let plain: Vec<Vec<f32>> = plain
        .epoch(0)
        .map(|b| b.unwrap().to_f32().into_raw_vec_and_offset().0)
        .collect();
    assert_eq!(
        full.into_iter().map(|(_, _, v)| v).collect::<Vec<_>>(),
        plain
    );
    for crop in [0, 6] {
        let e = Loader::new(
            s.clone(),
            LoaderOptions {
                crop_frames: Some(crop),
                ..opts(Shuffle::Uniform, 64)
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("crop_frames") && e.contains("a crop is 1 to 5 frames"),
            "{e}"
        );
    }
}

/// Crops of whole clips kept as f16, and of normalised segments: each row of a window is
/// the stored row's window (normalised by its mel bin's statistics).
#[test]
fn crops_keep_every_axis_but_the_frames_and_normalise_by_the_bin() {
    let t = tempfile::tempdir().unwrap();
    let s = split(t.path(), Dtype::F16, 6);
    let make = |workers, crop, unit, output| cropping(&s, workers, crop, unit, output);
    // Whole clips and f16 as stored: every axis kept but the frames.
    let clips = make(2, 2, Unit::Clip, Output::Stored);
    let b = clips.epoch(0).next().unwrap().unwrap();
    assert_eq!(&b.shape()[1..], &[79, 3, 32, 2]);
    let (id, at) = (b.ids()[0], b.offsets()[0]);
    let whole = s.clip(id.clip).unwrap();
    let got = b.to_f32();
    assert_eq!(
        got.index_axis(ndarray::Axis(0), 0),
        whole.slice(ndarray::s![.., .., .., at..at + 2]).into_dyn()
    );
    // Normalised windows: each row of the window by its mel bin's statistics.
    let stats = s.stats(2).unwrap();
    let (shift, scale) = stats.affine();
    let normed = Loader::new(
        s.clone(),
        LoaderOptions {
            crop_frames: Some(2),
            normalize: Some(stats.clone()),
            ..opts(Shuffle::Uniform, 64)
        },
    )
    .unwrap();
    let b = normed.epoch(2).next().unwrap().unwrap();
    let view = b.view().unwrap();
    for (k, (id, &at)) in b.ids().iter().zip(b.offsets()).enumerate().step_by(7) {
        let mut want = s
            .segment(id.clip, id.segment)
            .unwrap()
            .slice(ndarray::s![.., at..at + 2])
            .to_owned();
        for m in 0..32 {
            want.row_mut(m).mapv_inplace(|v| (v - shift[m]) * scale[m]);
        }
        assert_eq!(view.index_axis(ndarray::Axis(0), k), want.into_dyn());
    }
}

/// Augmentation (issue 38): masks, gain and mixup drawn from (seed, epoch, item), the
/// same batches with any workers and on a resume, mixup's partners and weights given.
#[test]
fn augmented_batches_are_the_same_with_any_workers_and_on_resume() {
    use melread::{Augment, Mixup};
    let t = tempfile::tempdir().unwrap();
    let s = split(t.path(), Dtype::F16, 6);
    let make = |workers| {
        Loader::new(
            s.clone(),
            LoaderOptions {
                workers,
                augment: Augment {
                    time_masks: 1,
                    time_mask_frames: 2,
                    time_mask_share: 1.0,
                    freq_masks: 2,
                    freq_mask_bins: 4,
                    gain_db: 3.0,
                    mixup: Some(Mixup {
                        alpha: 0.4,
                        prob: 1.0,
                    }),
                },
                ..opts(Shuffle::Uniform, 64)
            },
        )
        .unwrap()
    };
    type Read = (Vec<f32>, Vec<usize>, Vec<f32>);
    let read = |l: &Loader, from: usize| -> Vec<Read> {
        l.resume(1, from)
            .map(|b| {
                let b = b.unwrap();
                let m = b.mixed().expect("mixup on").clone();
                (b.to_f32().into_raw_vec_and_offset().0, m.partner, m.weight)
            })
            .collect()
    };
    let one = read(&make(1), 0);
    assert!(one.len() > 3);
    assert_eq!(one, read(&make(4), 0), "workers change nothing");
    assert_eq!(
        read(&make(2), 3),
        one[3..],
        "a resume reads the same batches"
    );
    let plain: Vec<Vec<f32>> = Loader::new(s.clone(), opts(Shuffle::Uniform, 64))
        .unwrap()
        .epoch(1)
        .map(|b| b.unwrap().to_f32().into_raw_vec_and_offset().0)
        .collect();
    assert_ne!(one[0].0, plain[0], "augmentation changed the values");
    assert!(one.iter().any(|(_, _, w)| w.iter().any(|&w| w < 1.0)));
    // A mask wider than the items (5 frames) is refused, naming the field.
    let e = Loader::new(
        s.clone(),
        LoaderOptions {
            augment: Augment {
                time_masks: 1,
                time_mask_frames: 6,
                ..Augment::default()
            },
            ..opts(Shuffle::Uniform, 64)
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("augment.time_mask_frames") && e.contains("5 frames"),
        "{e}"
    );
}
