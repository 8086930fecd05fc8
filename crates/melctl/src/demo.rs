//! `melctl demo`: a small deterministic leak-4k-shaped dataset whose five classes sound different.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use hound::{SampleFormat, WavSpec, WavWriter};
pub use melkit::demo::CLASSES;
use melkit::demo::synth;

/// The most clips `melctl demo` generates (about 82 GB of leak-4k WAVs): a bound on a typo.
pub const MAX_CLIPS: usize = 1_000_000;

/// Splits and their share of the clips.
pub const SPLITS: [(&str, f64); 3] = [("training", 0.7), ("validation", 0.2), ("testing", 0.1)];

/// Writes `clips` WAV files (16-bit PCM, mono, `rate` Hz, `n` samples each: the preset's
/// clip) under `root/{split}/{class}/`. Returns the number written. A rerun keeps files it
/// wrote before; anything else under `root` (a file of other content, an extra file or
/// folder, a link) is refused before the first write, so the demo never overwrites a file
/// nor builds data it did not make.
pub fn generate(root: &Path, clips: usize, rate: u32, n: usize) -> Result<usize> {
    check_size(root, clips, n)?;
    let plan = plan(clips);
    check_existing(root, &plan, rate, n)?;
    for clip in &plan {
        let path = root.join(&clip.rel);
        if path.exists() {
            continue; // checked above: this demo's own bytes
        }
        let dir = path.parent().expect("a clip path has its class folder");
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let tmp = path.with_extension("wav.partial");
        std::fs::write(&tmp, clip.wav(rate, n)?)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
    }
    Ok(plan.len())
}

/// One demo clip: where it goes under the root, its class and its synthesis seed.
struct DemoClip {
    rel: PathBuf,
    class: usize,
    index: u64,
}

impl DemoClip {
    /// The clip's WAV file, byte for byte.
    fn wav(&self, rate: u32, n: usize) -> Result<Vec<u8>> {
        let spec = WavSpec {
            channels: 1,
            sample_rate: rate,
            bits_per_sample: 16,
            sample_format: SampleFormat::Int,
        };
        let mut bytes = std::io::Cursor::new(Vec::with_capacity(44 + 2 * n));
        let mut w = WavWriter::new(&mut bytes, spec)?;
        for v in synth(self.class, n, rate as f64, self.index) {
            w.write_sample((v * 32767.0).round() as i16)?;
        }
        w.finalize()?;
        Ok(bytes.into_inner())
    }
}

/// Every clip of a `clips`-clip demo, split by [`SPLITS`] and cycling through the classes.
fn plan(clips: usize) -> Vec<DemoClip> {
    let mut out = Vec::with_capacity(clips);
    for (s, (split, share)) in SPLITS.iter().enumerate() {
        let split_clips = if s == SPLITS.len() - 1 {
            clips - out.len()
        } else {
            (clips as f64 * share).round() as usize
        };
        for k in 0..split_clips {
            let class = k % CLASSES.len();
            out.push(DemoClip {
                rel: Path::new(split)
                    .join(CLASSES[class])
                    .join(format!("{split}_{k:06}.wav")),
                class,
                index: out.len() as u64 + 1,
            });
        }
    }
    out
}

/// Refuses, naming it, anything under `root` this demo would not write: a link, a file or
/// folder it has no place for, or a clip file whose bytes differ from the demo's. A
/// leftover `.wav.partial` of an interrupted run is allowed (it is written over).
fn check_existing(root: &Path, plan: &[DemoClip], rate: u32, n: usize) -> Result<()> {
    let meta = match std::fs::symlink_metadata(root) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", root.display())),
    };
    let refuse = |path: &Path, why: &str| {
        anyhow::anyhow!(
            "{}: {why}; the demo writes only its own clips and never overwrites: use a new folder",
            path.display()
        )
    };
    if !meta.is_dir() {
        return Err(refuse(root, "not a folder"));
    }
    let clips: std::collections::HashMap<&Path, &DemoClip> =
        plan.iter().map(|c| (c.rel.as_path(), c)).collect();
    let folders: std::collections::HashSet<&Path> = plan
        .iter()
        .flat_map(|c| c.rel.ancestors().skip(1))
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))?
        {
            let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
            let rel = rel.join(entry.file_name());
            let path = root.join(&rel);
            let kind = entry
                .file_type()
                .with_context(|| format!("cannot read {}", path.display()))?;
            if kind.is_dir() && folders.contains(rel.as_path()) {
                stack.push(rel);
            } else if kind.is_file()
                && let Some(clip) = clips.get(rel.as_path())
            {
                let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                let same = len == 44 + 2 * n as u64
                    && std::fs::read(&path)
                        .with_context(|| format!("cannot read {}", path.display()))?
                        == clip.wav(rate, n)?;
                if !same {
                    return Err(refuse(&path, "exists and is not this demo's clip"));
                }
            } else if kind.is_file()
                && rel
                    .to_str()
                    .and_then(|r| r.strip_suffix(".partial"))
                    .is_some_and(|r| clips.contains_key(Path::new(r)))
            {
                // An interrupted run's temporary file: written over.
            } else {
                return Err(refuse(&path, "is not part of the demo"));
            }
        }
    }
    Ok(())
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
        let d = melkit::audio::scan(t.path()).unwrap();
        assert_eq!(d.label_names, CLASSES.to_vec());
        let counts: Vec<usize> = d.splits.iter().map(|s| s.files.len()).collect();
        // sorted split names: testing, training, validation
        assert_eq!(counts, vec![2, 14, 4]);
    }

    #[test]
    fn a_rerun_keeps_its_own_clips_and_refuses_anything_else_without_writing() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("data");
        generate(&root, 10, 4096, 256).unwrap();
        let clip = root.join("training/leak/training_000000.wav");
        let first = std::fs::read(&clip).unwrap();
        // A rerun keeps every file, and an interrupted run's temporary is written over.
        std::fs::write(clip.with_extension("wav.partial"), b"half").unwrap();
        std::fs::remove_file(&clip).unwrap();
        assert_eq!(generate(&root, 10, 4096, 256).unwrap(), 10);
        assert_eq!(std::fs::read(&clip).unwrap(), first);
        // Someone's file at a demo path, of the demo's size or not, is never overwritten.
        for other in [vec![7u8; first.len()], b"my own notes".to_vec()] {
            std::fs::write(&clip, &other).unwrap();
            let e = generate(&root, 10, 4096, 256).unwrap_err().to_string();
            assert!(
                e.contains("training_000000.wav: exists and is not this demo's clip"),
                "{e}"
            );
            assert_eq!(std::fs::read(&clip).unwrap(), other, "left as it was");
        }
        std::fs::write(&clip, &first).unwrap();
        // Anything the demo has no place for would be built as data: refused, naming it.
        for (extra, make) in [
            ("training/whale/song.wav", true),
            ("testing/notes.txt", true),
            ("training/leak/link.wav", false),
        ] {
            let path = root.join(extra);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            if make {
                std::fs::write(&path, b"x").unwrap();
            } else {
                std::os::unix::fs::symlink(&clip, &path).unwrap();
            }
            let e = generate(&root, 10, 4096, 256).unwrap_err().to_string();
            let shown = if extra.starts_with("training/whale") {
                "training/whale"
            } else {
                extra
            };
            assert!(
                e.contains(shown) && e.contains("is not part of the demo"),
                "{e}"
            );
            std::fs::remove_file(&path).unwrap();
            if extra.starts_with("training/whale") {
                std::fs::remove_dir(path.parent().unwrap()).unwrap();
            }
        }
        assert_eq!(generate(&root, 10, 4096, 256).unwrap(), 10);
        // A different clip count asks for other files: the old ones are not its own.
        let e = generate(&root, 5, 4096, 256).unwrap_err().to_string();
        assert!(e.contains("is not part of the demo"), "{e}");
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
