//! Every loader yields the same clips, in the same order, with the same bytes and the
//! same failures; the memmap cache is rebuilt whenever it must be, and never used stale.

use std::path::Path;

use hound::{SampleFormat, WavSpec, WavWriter};
use mel_audio::FileEntry;
use mel_core::config::StreamConfig;
use mel_core::spec::AudioConfig;
use mel_core::{AudioLoader, ClipFailure};
use mel_loaders::{CacheKey, CacheLoader, CacheOutcome, PreloadLoader, StreamLoader};

fn audio() -> AudioConfig {
    AudioConfig {
        sample_rate: 1000,
        clip_seconds: 0.1,
        ..AudioConfig::default()
    }
}

fn write_wav(path: &Path, seed: usize, frames: usize) {
    let spec = WavSpec {
        channels: 1,
        sample_rate: 1000,
        bits_per_sample: 16,
        sample_format: SampleFormat::Int,
    };
    let mut w = WavWriter::create(path, spec).unwrap();
    for k in 0..frames {
        w.write_sample(((seed * 7919 + k * 31) % 20000) as i16 - 10000)
            .unwrap();
    }
    w.finalize().unwrap();
}

/// 37 files: lengths vary (pad and trim), files 5 and 22 are broken.
fn dataset(dir: &Path) -> Vec<FileEntry> {
    (0..37)
        .map(|i| {
            let path = dir.join(format!("c{i:03}.wav"));
            match i {
                5 => std::fs::write(&path, b"not audio").unwrap(),
                22 => std::fs::write(&path, b"").unwrap(),
                _ => write_wav(&path, i, 50 + (i * 13) % 120),
            }
            FileEntry {
                meta: Default::default(),
                path,
                rel: format!("c{i:03}.wav"),
                label: (i % 3) as i64,
            }
        })
        .collect()
}

/// Everything a loader yields: (indices, sample bits) plus its failures.
fn drain(mut l: Box<dyn AudioLoader>) -> (Vec<usize>, Vec<u32>, Vec<ClipFailure>) {
    let mut idx = Vec::new();
    let mut bits = Vec::new();
    while let Some(b) = l.next_batch() {
        let b = b.unwrap();
        assert_eq!(b.samples.samples().len(), b.indices.len() * 100);
        idx.extend(b.indices);
        bits.extend(b.samples.samples().iter().map(|x| x.to_bits()));
    }
    (idx, bits, l.failures().to_vec())
}

fn stream(
    files: &[FileEntry],
    batch: usize,
    readers: usize,
    fpt: usize,
    in_flight: usize,
) -> Box<dyn AudioLoader> {
    let cfg = StreamConfig {
        readers,
        files_per_task: fpt,
        in_flight,
        read_size: 4096,
        ..StreamConfig::default()
    };
    Box::new(StreamLoader::start(files.to_vec(), &audio(), batch, 2, &cfg, 1).unwrap())
}

#[test]
fn preload_stream_and_memmap_yield_identical_clips_and_failures() {
    let t = tempfile::tempdir().unwrap();
    let files = dataset(t.path());
    let reference = drain(Box::new(
        PreloadLoader::load(&files, &audio(), 8, &|| true).unwrap(),
    ));
    assert_eq!(reference.0.len(), 35);
    assert_eq!(
        reference.2.iter().map(|f| f.index).collect::<Vec<_>>(),
        vec![5, 22]
    );
    for (batch, readers, fpt, in_flight) in [
        (8, 3, 2, 0),
        (5, 1, 5, 1),
        (64, 4, 1, 0),
        (1, 2, 1, 3),
        (7, 2, 3, 100),
    ] {
        let got = drain(stream(&files, batch, readers, fpt, in_flight));
        assert_eq!(
            got, reference,
            "stream batch {batch} readers {readers} fpt {fpt}"
        );
    }
    let cache = t.path().join("cache");
    let key = CacheKey::new(&cache, t.path(), "train", &files, &audio()).unwrap();
    let first = CacheLoader::open(&key, &files, &audio(), 6, &|| true).unwrap();
    assert_eq!(first.outcome(), Some(&CacheOutcome::Miss));
    assert_eq!(drain(Box::new(first)), reference);
    let second = CacheLoader::open(&key, &files, &audio(), 6, &|| true).unwrap();
    assert_eq!(second.outcome(), Some(&CacheOutcome::Hit));
    assert!(second.stats().note.contains("cache hit"));
    assert_eq!(drain(Box::new(second)), reference);
}

fn reopen(dir: &Path, files: &[FileEntry]) -> (CacheOutcome, Vec<usize>) {
    let key = CacheKey::new(&dir.join("cache"), dir, "train", files, &audio()).unwrap();
    let l = CacheLoader::open(&key, files, &audio(), 16, &|| true).unwrap();
    let outcome = l.outcome().cloned().unwrap();
    let (idx, bits, _) = drain(Box::new(l));
    // Whatever happened, what is served equals a fresh decode.
    let fresh = drain(Box::new(
        PreloadLoader::load(files, &audio(), 16, &|| true).unwrap(),
    ));
    assert_eq!((idx.clone(), bits), (fresh.0, fresh.1));
    (outcome, idx)
}

fn cache_file(dir: &Path) -> std::path::PathBuf {
    let mut found: Vec<_> = std::fs::read_dir(dir.join("cache"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(found.len(), 1, "one cache file, no leftovers: {found:?}");
    found.pop().unwrap()
}

#[test]
fn the_cache_is_rebuilt_after_touch_add_remove_corruption_and_truncation() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let mut files = dataset(dir);
    assert_eq!(reopen(dir, &files).0, CacheOutcome::Miss);
    assert_eq!(reopen(dir, &files).0, CacheOutcome::Hit);

    // Touched: same bytes, new modification time.
    let f = std::fs::File::options()
        .write(true)
        .open(&files[3].path)
        .unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    drop(f);
    let (o, _) = reopen(dir, &files);
    assert!(
        matches!(&o, CacheOutcome::Rebuilt(r) if r.contains("fingerprint")),
        "{o:?}"
    );
    assert_eq!(reopen(dir, &files).0, CacheOutcome::Hit);

    // Rewritten with other content of the same length.
    write_wav(&files[4].path, 999, 50 + 4 * 13); // same length as before
    assert!(matches!(reopen(dir, &files).0, CacheOutcome::Rebuilt(_)));

    // Added.
    let p = dir.join("c999.wav");
    write_wav(&p, 999, 80);
    files.push(FileEntry {
        meta: Default::default(),
        path: p,
        rel: "c999.wav".into(),
        label: 1,
    });
    let (o, idx) = reopen(dir, &files);
    assert!(matches!(o, CacheOutcome::Rebuilt(_)));
    assert_eq!(idx.last(), Some(&37));

    // Removed.
    files.remove(10);
    assert!(matches!(reopen(dir, &files).0, CacheOutcome::Rebuilt(_)));
    assert_eq!(reopen(dir, &files).0, CacheOutcome::Hit);

    // One flipped byte in the arena.
    let path = cache_file(dir);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[4096 + 1234] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let (o, _) = reopen(dir, &files);
    assert!(
        matches!(&o, CacheOutcome::Rebuilt(r) if r.contains("checksum")),
        "{o:?}"
    );

    // Truncated.
    let path = cache_file(dir);
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let (o, _) = reopen(dir, &files);
    assert!(
        matches!(&o, CacheOutcome::Rebuilt(r) if r.contains("truncated")),
        "{o:?}"
    );

    // A damaged header.
    let path = cache_file(dir);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[40] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let (o, _) = reopen(dir, &files);
    assert!(
        matches!(&o, CacheOutcome::Rebuilt(r) if r.contains("header")),
        "{o:?}"
    );

    // Not a cache at all.
    std::fs::write(cache_file(dir), b"hello").unwrap();
    assert!(matches!(reopen(dir, &files).0, CacheOutcome::Rebuilt(_)));
    assert_eq!(reopen(dir, &files).0, CacheOutcome::Hit);
}

#[test]
fn dropping_a_stream_loader_midway_stops_and_joins_its_readers() {
    let t = tempfile::tempdir().unwrap();
    let files = dataset(t.path());
    let mut l = stream(&files, 4, 3, 1, 0);
    let first = l.next_batch().unwrap().unwrap();
    assert_eq!(first.indices, vec![0, 1, 2, 3]);
    drop(l); // must not hang or touch freed buffers
    assert_eq!(first.samples.samples().len(), 400);
}

#[test]
fn a_flipped_byte_in_any_section_of_the_cache_is_never_served() {
    // The dataset has skipped files, so the index maps rows to files non-trivially: a
    // damaged index would serve one file's samples under another's name.
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let files = dataset(dir);
    assert_eq!(reopen(dir, &files).0, CacheOutcome::Miss);
    let path = cache_file(dir);
    let good = std::fs::read(&path).unwrap();
    // After the 4096-byte header: the arena (35 clips × 100 samples × 4 bytes), its
    // checksums, the index and the failure list. Probe the header's used bytes, the
    // arena's edges and every byte after the arena.
    let arena_end = 4096 + 35 * 100 * 4;
    let probes: Vec<usize> = (0..120)
        .chain([4096, 4097, arena_end - 1])
        .chain(arena_end..good.len())
        .collect();
    for i in probes {
        let mut bad = good.clone();
        bad[i] ^= 0x10;
        std::fs::write(&path, &bad).unwrap();
        let (o, _) = reopen(dir, &files); // asserts what is served equals a fresh decode
        assert!(
            matches!(&o, CacheOutcome::Rebuilt(_)),
            "flipped byte {i}: {o:?}"
        );
    }
}

#[test]
fn a_stop_request_ends_a_preload_and_a_cache_build_at_once() {
    let t = tempfile::tempdir().unwrap();
    let files = dataset(t.path());
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let stop_after_3 = || seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 3;
    let r = PreloadLoader::load(&files, &audio(), 8, &stop_after_3);
    assert!(matches!(r, Err(mel_core::Error::Cancelled)));
    let key = CacheKey::new(&t.path().join("cache"), t.path(), "s", &files, &audio()).unwrap();
    let r = CacheLoader::open(&key, &files, &audio(), 8, &|| false);
    assert!(matches!(r, Err(mel_core::Error::Cancelled)));
    // Nothing at the cache's path, no temporary left.
    let left: Vec<_> = std::fs::read_dir(t.path().join("cache")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Loaders that share their batch buffers (a build's splits, one after another) yield
/// exactly what fresh ones do, whatever the earlier loader left in the buffers.
#[test]
fn streaming_loaders_sharing_buffers_yield_what_fresh_ones_do() {
    let t = tempfile::tempdir().unwrap();
    let files = dataset(t.path());
    let (first, second) = files.split_at(20);
    let cfg = StreamConfig {
        readers: 2,
        files_per_task: 3,
        read_size: 4096,
        ..StreamConfig::default()
    };
    let spares = mel_loaders::pool::SpareBuffers::default();
    let shared = |files: &[FileEntry]| -> Box<dyn AudioLoader> {
        Box::new(
            StreamLoader::start(files.to_vec(), &audio(), 8, 2, &cfg, 1)
                .unwrap()
                .with_spares(spares.clone()),
        )
    };
    // Longer clips first: the second loader's buffers hold the first's samples.
    assert_eq!(drain(shared(second)), drain(stream(second, 8, 2, 3, 0)));
    let left = spares.held();
    assert!(left > 0, "the first loader left its buffers");
    assert_eq!(drain(shared(first)), drain(stream(first, 8, 2, 3, 0)));
    assert_eq!(drain(shared(second)), drain(stream(second, 8, 2, 3, 0)));
    assert!(spares.held() >= left, "buffers come back after each loader");
}
