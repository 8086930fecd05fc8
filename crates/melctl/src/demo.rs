//! `melctl demo`: a small deterministic leak-4k-shaped dataset whose five classes sound different.

use std::path::Path;

use anyhow::{Context, Result};
use hound::{SampleFormat, WavSpec, WavWriter};
pub use melkit::demo::CLASSES;
use melkit::demo::synth;

/// Splits and their share of the clips.
pub const SPLITS: [(&str, f64); 3] = [("training", 0.7), ("validation", 0.2), ("testing", 0.1)];

/// Writes `clips` WAV files (16-bit PCM, mono, `rate` Hz, `n` samples each: the preset's
/// clip) under `root/{split}/{class}/`. Returns the number written. Files that already
/// exist with the right size are kept.
pub fn generate(root: &Path, clips: usize, rate: u32, n: usize) -> Result<usize> {
    let spec = WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: SampleFormat::Int,
    };
    let expected_len = 44 + 2 * n as u64;
    let mut written = 0;
    let mut index = 0u64;
    for (s, (split, share)) in SPLITS.iter().enumerate() {
        let split_clips = if s == SPLITS.len() - 1 {
            clips - written
        } else {
            (clips as f64 * share).round() as usize
        };
        for k in 0..split_clips {
            let class = k % CLASSES.len();
            let dir = root.join(split).join(CLASSES[class]);
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let path = dir.join(format!("{split}_{:06}.wav", k));
            index += 1;
            written += 1;
            if std::fs::metadata(&path).is_ok_and(|m| m.len() == expected_len) {
                continue;
            }
            let tmp = path.with_extension("wav.partial");
            let mut w = WavWriter::create(&tmp, spec)
                .with_context(|| format!("cannot write {}", tmp.display()))?;
            for v in synth(class, n, rate as f64, index) {
                w.write_sample((v * 32767.0).round() as i16)?;
            }
            w.finalize()?;
            std::fs::rename(&tmp, &path)?;
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_lays_out_splits_and_classes() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(generate(t.path(), 20, 4096, 4096).unwrap(), 20);
        let d = mel_audio::scan(t.path()).unwrap();
        assert_eq!(d.label_names, CLASSES.to_vec());
        let counts: Vec<usize> = d.splits.iter().map(|s| s.files.len()).collect();
        // sorted split names: testing, training, validation
        assert_eq!(counts, vec![2, 14, 4]);
    }
}
