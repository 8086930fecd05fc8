//! What a build stores beside the spectrograms: per-mel-bin statistics (checked against
//! numpy on the output) and each clip's provenance (checked against the files).

mod util;

use hound::{SampleFormat, WavSpec, WavWriter};
use util::Dir;

/// A `rate` Hz WAV of `channels` channels and `frames` frames of a noisy tone.
fn wav(dir: &Dir, rel: &str, rate: u32, channels: u16, frames: usize) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let spec = WavSpec {
        channels,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: SampleFormat::Int,
    };
    let mut w = WavWriter::create(&p, spec).unwrap();
    for i in 0..frames {
        for c in 0..channels {
            let t = i as f64 / rate as f64;
            let v = (2.0 * std::f64::consts::PI * (300.0 + 100.0 * c as f64) * t).sin() * 0.3
                + ((i * 7919 + c as usize * 31) % 1000) as f64 / 20000.0;
            w.write_sample((v * 32767.0) as i16).unwrap();
        }
    }
    w.finalize().unwrap();
}

#[test]
fn statistics_and_provenance_are_stored_and_right() {
    let dir = Dir::new();
    // leak-4k clips are 40,960 samples at 4096 Hz.
    wav(&dir, "data/training/leak/a.wav", 4096, 1, 40_960); // as is
    wav(&dir, "data/training/leak/b.wav", 8000, 2, 80_000); // resampled, downmixed
    wav(&dir, "data/training/quiet/c.wav", 4096, 1, 10_000); // padded
    wav(&dir, "data/training/quiet/d.wav", 4096, 1, 50_000); // trimmed
    for sink in ["hdf5", "npy"] {
        let report = format!("{sink}.json");
        let stdout = dir
            .melctl()
            .args([
                "build", "-i", "data", "-o", sink, "--dtype", "f32", "--sink", sink,
            ])
            .args(["--report", &report])
            .stdout();
        assert!(
            stdout.contains("1 resampled, 1 downmixed, 1 padded, 1 trimmed")
                && stdout.contains("leak 2, quiet 2"),
            "{stdout}"
        );
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(&report)).unwrap()).unwrap();
        assert_eq!(r["splits"][0]["provenance"]["resampled"], 1);
        assert_eq!(r["splits"][0]["classes"][1]["clips"], 2);
    }
    // numpy: statistics over every value of each mel bin, and the source columns.
    let script = r#"
import h5py, json, numpy as np, sys
f = h5py.File("hdf5/training.h5")
mel = f["mel"][:].astype(np.float64)             # [N, long, short, mel, frame]
per_mel = np.moveaxis(mel, -2, 0).reshape(mel.shape[-2], -1)
assert np.allclose(f["mel_mean"][:], per_mel.mean(axis=1), rtol=0, atol=1e-9), "mean"
assert np.allclose(f["mel_std"][:], per_mel.std(axis=1), rtol=0, atol=1e-9), "std"
assert f.attrs["stats_count"] == per_mel.shape[1], "count"
assert list(f["source_rate"][:]) == [4096, 8000, 4096, 4096], list(f["source_rate"][:])
assert list(f["source_channels"][:]) == [1, 2, 1, 1]
assert list(f["source_frames"][:]) == [40960, 80000, 10000, 50000]
meta = json.load(open("npy/training.npy.d/meta.json"))
m = np.load("npy/training.npy.d/mel.npy").astype(np.float64)
pm = np.moveaxis(m, -2, 0).reshape(m.shape[-2], -1)
assert np.allclose(meta["mel_mean"], pm.mean(axis=1), rtol=0, atol=1e-9)
assert np.allclose(meta["mel_std"], pm.std(axis=1), rtol=0, atol=1e-9)
assert meta["source_frames"] == [40960, 80000, 10000, 50000]
print("stats ok", per_mel.shape)
"#;
    let out = dir.program("python3").args(["-c", script]).stdout();
    assert!(out.contains("stats ok"), "{out}");
}
