//! Per-mel-bin statistics against numpy on the output's own `mel` (read by h5py or
//! numpy, widened to float64): the reader's one-pass computation, and the statistics
//! stored in the output when the build wrote them.

mod common;

use common::{Out, build, python};
use melkit::{Dtype, Preset};
use melread::{MelStats, Split};

/// numpy's per-bin mean and (population) standard deviation of every value of `mel`.
const NUMPY: &str = r#"
import json, sys
import numpy as np
path = sys.argv[1]
if path.endswith(".h5"):
    import h5py
    with h5py.File(path, "r") as f:
        x = f["mel"][...]
else:
    x = np.load(path + "/mel.npy")
if x.dtype == np.uint16:  # bf16 bit patterns
    x = (x.astype(np.uint32) << 16).view(np.float32)
x = np.moveaxis(x.astype(np.float64), -2, 0).reshape(x.shape[-2], -1)
print(json.dumps({"mean": x.mean(axis=1).tolist(), "std": x.std(axis=1).tolist(), "count": x.shape[1]}))
"#;

fn numpy_stats(path: &std::path::Path) -> MelStats {
    let out = python(NUMPY, &[path.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let list = |k: &str| -> Vec<f64> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    MelStats {
        mean: list("mean"),
        std: list("std"),
        count: v["count"].as_u64().unwrap(),
    }
}

fn assert_close(ours: &MelStats, numpy: &MelStats, what: &str) {
    assert_eq!(ours.n_mels(), numpy.n_mels(), "{what}");
    assert_eq!(ours.count, numpy.count, "{what}: values per bin");
    for m in 0..ours.n_mels() {
        for (a, b, name) in [
            (ours.mean[m], numpy.mean[m], "mean"),
            (ours.std[m], numpy.std[m], "std"),
        ] {
            assert!(
                (a - b).abs() <= 1e-9 * b.abs().max(1.0),
                "{what}: bin {m} {name}: {a} against numpy's {b}"
            );
        }
    }
}

#[test]
fn statistics_match_numpy_on_the_output() {
    let t = tempfile::tempdir().unwrap();
    let cases = [
        (
            Preset::Leak4k,
            Dtype::F16,
            Out::Hdf5 {
                chunk_clips: 0,
                gzip: 0,
            },
            "training.h5",
        ),
        (
            Preset::Leak4k,
            Dtype::F32,
            Out::Hdf5 {
                chunk_clips: 4,
                gzip: 1,
            },
            "training.h5",
        ),
        (Preset::Speech16k, Dtype::Bf16, Out::Npy, "training.npy.d"),
    ];
    for (k, (preset, dtype, out, name)) in cases.into_iter().enumerate() {
        let dir = build(
            &t.path().join(k.to_string()),
            preset,
            dtype,
            out,
            &[("training", 9)],
        );
        let path = dir.join(name);
        let split = Split::open(&path).unwrap();
        let numpy = numpy_stats(&path);
        let what = format!("{preset:?} {dtype:?} {out:?}");
        for threads in [1, 3] {
            assert_close(&split.compute_stats(threads).unwrap(), &numpy, &what);
        }
        // What a trainer asks for: stored statistics when the build wrote them (checked
        // against numpy too), else the same computation.
        if let Some(stored) = split.stored_stats() {
            assert_close(stored, &numpy, &format!("{what}, stored"));
        }
        assert_close(&split.stats(2).unwrap(), &numpy, &what);
        // Leak-4k's bins are tens of dB apart: a wrong axis would show.
        assert!(numpy.std.iter().all(|&s| s > 0.0));
    }
}

#[test]
fn stored_statistics_read_the_same_from_hdf5_and_npy_to_the_bit() {
    // npy keeps them as JSON decimals: parsed without serde_json's `float_roundtrip`, a
    // few came back one unit in the last place off what was written.
    let t = tempfile::tempdir().unwrap();
    let read = |out: Out, name: &str| {
        let dir = build(
            &t.path().join(name),
            Preset::Leak4k,
            Dtype::F32,
            out,
            &[("training", 9)],
        );
        let split = Split::open(dir.join(name)).unwrap();
        split.stored_stats().expect("stored statistics").clone()
    };
    let h5 = read(
        Out::Hdf5 {
            chunk_clips: 0,
            gzip: 0,
        },
        "training.h5",
    );
    let npy = read(Out::Npy, "training.npy.d");
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&h5.mean), bits(&npy.mean), "mean");
    assert_eq!(bits(&h5.std), bits(&npy.std), "std");
    assert_eq!(h5.count, npy.count);
}
