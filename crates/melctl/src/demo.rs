//! `melctl demo`: a small deterministic leak-4k-shaped dataset whose five classes sound different.

use std::path::Path;

use anyhow::{Context, Result};
use hound::{SampleFormat, WavSpec, WavWriter};
pub use melkit::demo::CLASSES;
use melkit::demo::synth;

/// The most clips `melctl demo` generates (about 82 GB of leak-4k WAVs): a bound on a typo.
pub const MAX_CLIPS: usize = 1_000_000;

/// Splits and their share of the clips.
pub const SPLITS: [(&str, f64); 3] = [("training", 0.7), ("validation", 0.2), ("testing", 0.1)];

/// Writes `clips` WAV files (16-bit PCM, mono, `rate` Hz, `n` samples each: the preset's
/// clip) under `root/{split}/{class}/`. Returns the number written. Files that already
/// exist with the right size are kept.
pub fn generate(root: &Path, clips: usize, rate: u32, n: usize) -> Result<usize> {
    check_size(root, clips, n)?;
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

/// Refuses a clip count of 0 or over [`MAX_CLIPS`], and a dataset that would not fit in the
/// free space of the disk under `root` (checked before the first file is written).
fn check_size(root: &Path, clips: usize, n: usize) -> Result<()> {
    if clips == 0 || clips > MAX_CLIPS {
        anyhow::bail!("--clips {clips}: the demo generates 1 to {MAX_CLIPS} clips");
    }
    let need = clips as u128 * (44 + 2 * n as u128);
    if let Some(free) = free_bytes(root)
        && need > free as u128
    {
        anyhow::bail!(
            "--clips {clips}: the WAV files would take {:.1} GB, more than the {:.1} GB free under {}",
            need as f64 / 1e9,
            free as f64 / 1e9,
            root.display()
        );
    }
    Ok(())
}

/// Bytes available to this user on the file system that holds `path` (or its nearest
/// existing ancestor); `None` when that cannot be asked.
fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let existing = path
        .ancestors()
        .find(|p| p.exists() || p.as_os_str().is_empty())?;
    let existing = if existing.as_os_str().is_empty() {
        Path::new(".")
    } else {
        existing
    };
    let c = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: a valid NUL-terminated path and a buffer of the right type.
    if unsafe { libc::statvfs(c.as_ptr(), s.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statvfs succeeded and filled the buffer.
    let s = unsafe { s.assume_init() };
    #[allow(clippy::unnecessary_cast)] // u32 on some targets
    Some((s.f_bavail as u64).saturating_mul(s.f_frsize as u64))
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

    #[test]
    fn absurd_clip_counts_and_datasets_larger_than_the_disk_are_refused_before_writing() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("data");
        let e = generate(&root, 0, 4096, 40_960).unwrap_err().to_string();
        assert!(e.contains("1 to 1000000 clips"), "{e}");
        let e = generate(&root, usize::MAX, 4096, 40_960)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 to 1000000 clips"), "{e}");
        // A million clips of 2^26 samples (128 MiB each) fit no test machine's disk.
        let e = generate(&root, MAX_CLIPS, 4096, 1 << 26)
            .unwrap_err()
            .to_string();
        assert!(e.contains("GB free under"), "{e}");
        assert!(!root.exists(), "nothing may be written before the check");
    }
}
