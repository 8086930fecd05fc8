//! The memmap cache against what it finds and what the disk does: a FIFO at the cache's
//! path is replaced, never waited on; a full disk is an error that says so, before any
//! page of the map is written (where a full disk would otherwise raise SIGBUS).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use hound::{SampleFormat, WavSpec, WavWriter};
use mel_audio::FileEntry;
use mel_core::Error;
use mel_core::spec::AudioConfig;
use mel_loaders::{CacheKey, CacheLoader, CacheOutcome};

fn audio(seconds: f64) -> AudioConfig {
    AudioConfig {
        sample_rate: 1000,
        clip_seconds: seconds,
        ..AudioConfig::default()
    }
}

fn dataset(dir: &Path, n: usize, frames: usize) -> Vec<FileEntry> {
    let spec = WavSpec {
        channels: 1,
        sample_rate: 1000,
        bits_per_sample: 16,
        sample_format: SampleFormat::Int,
    };
    (0..n)
        .map(|i| {
            let path = dir.join(format!("c{i:03}.wav"));
            let mut w = WavWriter::create(&path, spec).unwrap();
            for k in 0..frames {
                w.write_sample(((i * 7919 + k * 31) % 20000) as i16 - 10000)
                    .unwrap();
            }
            w.finalize().unwrap();
            FileEntry {
                meta: Default::default(),
                path,
                rel: format!("c{i:03}.wav"),
                label: (i % 3) as i64,
            }
        })
        .collect()
}

/// `CacheLoader::open` on another thread; its result, or a panic after 20 s (a hang).
fn open_within(
    key: &CacheKey,
    files: &[FileEntry],
    audio: &AudioConfig,
) -> mel_core::Result<CacheLoader> {
    let (tx, rx) = mpsc::channel();
    let (key, files, audio) = (key.clone(), files.to_vec(), audio.clone());
    std::thread::spawn(move || {
        let _ = tx.send(CacheLoader::open(&key, &files, &audio, 4, &|| true));
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("opening the cache did not return within 20 s"))
}

#[test]
fn a_fifo_at_the_cache_path_is_refused_not_waited_on_nor_replaced() {
    let t = tempfile::tempdir().unwrap();
    let files = dataset(t.path(), 5, 120);
    let a = audio(0.1);
    let key = CacheKey::new(&t.path().join("cache"), t.path(), "train", &files, &a).unwrap();
    std::fs::create_dir_all(key.path.parent().unwrap()).unwrap();
    let c = std::ffi::CString::new(key.path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let Err(e) = open_within(&key, &files, &a) else {
        panic!("a FIFO at the cache's path was replaced")
    };
    let e = e.to_string();
    assert!(e.contains("a FIFO") && e.contains("cache"), "{e}");
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&key.path)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

/// A tmpfs of `kib` KiB mounted at `at` until dropped (root only).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, kib: usize) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_is_called_a_full_disk() {
    let t = tempfile::tempdir().unwrap();
    // 40 clips of 2,000 f32 samples: a 324,096-byte cache on a 128 KiB disk.
    let files = dataset(t.path(), 40, 2000);
    let a = audio(2.0);
    let Some(disk) = Tmpfs::mount(&t.path().join("disk"), 128) else {
        println!("skipped: cannot mount a tmpfs (needs root)");
        return;
    };
    let cache = disk.0.join("cache");
    let key = CacheKey::new(&cache, t.path(), "train", &files, &a).unwrap();
    let e = match open_within(&key, &files, &a) {
        Ok(_) => panic!("a 324 KiB cache was built on a 128 KiB disk"),
        Err(e) => e,
    };
    let text = e.to_string();
    assert!(matches!(e, Error::Output { .. }), "{text}");
    for w in [
        "is full",
        "No space left on device",
        cache.to_str().unwrap(),
        "needs 324096 bytes",
    ] {
        assert!(text.contains(w), "{text:?} should say {w:?}");
    }
    // Nothing is left at the cache's path, and no temporary file fills the disk.
    let left: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("melcache"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
    // With room, the same cache builds.
    drop(disk);
    let key = CacheKey::new(&t.path().join("roomy"), t.path(), "train", &files, &a).unwrap();
    let l = open_within(&key, &files, &a).unwrap();
    assert_eq!(l.outcome(), Some(&CacheOutcome::Miss));
    assert_eq!(l.clips(), 40);
}
