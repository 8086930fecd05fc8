//! The memmap-cache loader. The first run decodes a split into a cache file; later
//! runs map it (memmap2) and skip decoding entirely.
//!
//! The file is in melctl's checksummed container format ([`mel_core::container`]),
//! little-endian, header padded to 4096 bytes:
//! ```text
//! 0      header: magic "MELCACHE", version, fingerprint (xxh3-128), 4 sections
//! 4096   arena: clips × clip_samples f32, in file order, failed files left out
//! ...    arena checksums: one xxh3-64 per 64 clips (the arena's own entry checks these)
//! ...    index: clips × u32 (the file index of each cached clip)
//! ...    failures: JSON [[index, kind, reason], ...]
//! ...    sources: JSON [[rate, channels, frames], ...], one per cached clip
//! ```
//! The fingerprint covers the format version, the audio settings and every file's
//! relative path, label, size and modification time: any change rebuilds the cache.
//! Every section is checked before use (the arena in parallel); a truncated file, a
//! damaged header or any checksum mismatch rebuilds it. A cache that fails a check is
//! never used.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use mel_audio::FileEntry;
use mel_core::atomic::{self, Staged};
use mel_core::container::{self, Section};
use mel_core::outputs::{Guard, Output, Written};
use mel_core::spec::AudioConfig;
use mel_core::{ClipFailure, Error, FailureKind, LoaderStats, Result, SampleStore, SourceInfo};
use memmap2::{Mmap, MmapMut};
use rayon::prelude::*;
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use crate::arena::ArenaLoader;
use crate::io::{DEFAULT_READ, load_clip, sort_outcomes};

const MAGIC: &[u8; 8] = b"MELCACHE";
const VERSION: u32 = 4;
const HEADER: usize = 4096;
/// Clips per arena checksum.
const CHUNK_CLIPS: usize = 64;

pub use crate::arena::CacheOutcome;

/// The cache file for one split of one dataset.
#[derive(Debug, Clone)]
pub struct CacheKey {
    /// The cache file.
    pub path: PathBuf,
    /// Fingerprint of the file list and audio settings.
    pub fingerprint: u128,
}

impl CacheKey {
    /// The key for `files` (split `split` of the dataset at `root`) under `cache_dir`.
    /// Reads each file's metadata (size and modification time).
    pub fn new(
        cache_dir: &Path,
        root: &Path,
        split: &str,
        files: &[FileEntry],
        audio: &AudioConfig,
    ) -> Result<Self> {
        let mut h = Xxh3::new();
        h.update(&VERSION.to_le_bytes());
        h.update(&mel_audio::files_fingerprint(files, audio).to_le_bytes());
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        let place = xxh3_64(format!("{}\0{split}", root.display()).as_bytes());
        let safe: String = split
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        Ok(CacheKey {
            path: cache_dir.join(format!("{safe}-{place:016x}.melcache")),
            fingerprint: h.digest128(),
        })
    }
}

/// A mapped cache file whose arena serves as sample storage.
struct MappedArena {
    map: Mmap,
    len: usize,
}

impl SampleStore for MappedArena {
    fn as_f32(&self) -> &[f32] {
        bytemuck::cast_slice(&self.map[HEADER..HEADER + self.len * 4])
    }
}

/// The cache's sections, in file order.
const SECTIONS: [&str; 5] = [
    "the arena",
    "the arena checksums",
    "the index",
    "the failures",
    "the sources",
];

/// Checksums of the arena, one per `CHUNK_CLIPS` clips, computed in parallel.
fn arena_checksums(arena: &[u8], clip_bytes: usize) -> Vec<u64> {
    arena
        .par_chunks((CHUNK_CLIPS * clip_bytes).max(1))
        .map(container::checksum)
        .collect()
}

/// The memmap-cache loader: the arena loader over a mapped cache file.
pub type CacheLoader = ArenaLoader;

impl ArenaLoader {
    /// Maps the cache for `files` at `key`, building (or rebuilding) it first when it is
    /// missing or unusable. Decoding runs in the current rayon pool; `on_file` is called
    /// before each file decoded, and once it returns false the build stops with
    /// [`Error::Cancelled`] (nothing is left at the cache's path). Two processes that need the same cache build it once: the
    /// cache folder is locked while a cache is checked or built, so the second waits and
    /// then finds it valid.
    pub fn open(
        key: &CacheKey,
        files: &[FileEntry],
        audio: &AudioConfig,
        batch_clips: usize,
        on_file: &(dyn Fn() -> bool + Sync),
    ) -> Result<Self> {
        let clip_samples = audio.clip_samples();
        let t0 = Instant::now();
        let dir = key.path.parent().unwrap_or(Path::new("."));
        if let Ok(m) = std::fs::metadata(dir)
            && !m.is_dir()
        {
            return Err(Error::output(
                dir,
                format!(
                    "the cache folder is {}, not a folder (run.cache_dir)",
                    mel_core::input::describe(m.file_type())
                ),
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let _lock = atomic::DirLock::wait(dir)?;
        let outcome = match Self::map_valid(key, files, clip_samples) {
            Ok(loader) => {
                let mut l = loader;
                l.batch_clips = batch_clips.max(1);
                l.stats.note = format!(
                    "cache hit: {} ({} clips, checked in {:.2} s)",
                    key.path.display(),
                    l.indices.len(),
                    t0.elapsed().as_secs_f64()
                );
                return Ok(l);
            }
            Err(None) => CacheOutcome::Miss,
            Err(Some(reason)) => CacheOutcome::Rebuilt(reason),
        };
        // Something melctl did not write (a FIFO, a device) at the cache's path is refused
        // now, before decoding, by the check every output goes through: it is never replaced.
        let cache = Output::new(&key.path, "the decoded-audio cache", Written::File);
        Guard::new().check(std::slice::from_ref(&cache))?;
        build(key, files, audio, on_file)?;
        let mut l = Self::map_valid(key, files, clip_samples).map_err(|why| {
            Error::output(
                &key.path,
                format!(
                    "the cache just written does not check out: {}",
                    why.unwrap_or_else(|| "missing".into())
                ),
            )
        })?;
        l.batch_clips = batch_clips.max(1);
        l.stats.note = match &outcome {
            CacheOutcome::Miss => format!(
                "cache miss: no {}; decoded and stored in {:.2} s",
                key.path.display(),
                t0.elapsed().as_secs_f64()
            ),
            CacheOutcome::Rebuilt(why) => format!(
                "cache rebuilt: {why}; decoded and stored in {:.2} s",
                t0.elapsed().as_secs_f64()
            ),
            CacheOutcome::Hit => unreachable!("handled above"),
        };
        l.outcome = Some(outcome);
        Ok(l)
    }

    /// Maps the cache if it exists and passes every check. `Err(None)`: no file;
    /// `Err(Some(reason))`: a file that must be rebuilt.
    fn map_valid(
        key: &CacheKey,
        files: &[FileEntry],
        clip_samples: usize,
    ) -> std::result::Result<Self, Option<String>> {
        // A regular file only, opened without blocking: a FIFO (or device) at the cache's
        // path is never waited on or mapped (and the rebuild refuses to replace it).
        let file = match mel_core::input::open_regular(&key.path, false) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(None),
            Err(e) => return Err(Some(format!("cannot open: {e}"))),
        };
        // SAFETY: the cache file is private to melctl and replaced only by rename, so the
        // mapped inode is never modified by melctl itself. A file truncated by someone
        // else while mapped raises SIGBUS, which the application reports.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Some(format!("cannot map: {e}")))?;
        let bad = |e: container::ContainerError| Some(e.to_string());
        let h = container::decode(
            &map,
            map.len() as u64,
            MAGIC,
            "cache",
            VERSION,
            HEADER as u64,
        )
        .map_err(bad)?;
        if h.fingerprint != key.fingerprint {
            return Err(Some(
                "the files or audio settings changed since the cache was built (fingerprint differs)"
                    .into(),
            ));
        }
        let [arena, sums, index, failures, sources] = h.sections[..] else {
            return Err(Some(format!("{} sections, 5 expected", h.sections.len())));
        };
        let clip_bytes = clip_samples * 4;
        let clips = (index.len / 4) as usize;
        if index.len % 4 != 0
            || clips > files.len()
            || arena.len != (clips * clip_bytes) as u64
            || sums.len != (clips.div_ceil(CHUNK_CLIPS) * 8) as u64
        {
            return Err(Some(
                "section sizes do not match the clip length and count".into(),
            ));
        }
        for (s, name) in [
            (sums, SECTIONS[1]),
            (index, SECTIONS[2]),
            (failures, SECTIONS[3]),
            (sources, SECTIONS[4]),
        ] {
            container::verify(&map[s.range()], &s, name).map_err(bad)?;
        }
        // The arena is covered by its chunk checksums, which its entry covers.
        if container::checksum(&map[sums.range()]) != arena.checksum {
            return Err(Some(format!(
                "checksum mismatch in {} (corrupted)",
                SECTIONS[0]
            )));
        }
        let stored = container::bytes_to_u64s(&map[sums.range()]);
        let actual = arena_checksums(&map[arena.range()], clip_bytes);
        if let Some(bad) = stored.iter().zip(&actual).position(|(a, b)| a != b) {
            return Err(Some(format!(
                "checksum mismatch in clips {}..{} (corrupted)",
                bad * CHUNK_CLIPS,
                ((bad + 1) * CHUNK_CLIPS).min(clips)
            )));
        }
        let indices: Vec<usize> = map[index.range()]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")) as usize)
            .collect();
        if indices.windows(2).any(|w| w[0] >= w[1]) || indices.iter().any(|&i| i >= files.len()) {
            return Err(Some("index is not increasing or out of range".into()));
        }
        let sources: Vec<SourceInfo> = serde_json::from_slice(&map[sources.range()])
            .map_err(|e| Some(format!("unreadable source list: {e}")))?;
        if sources.len() != clips {
            return Err(Some("the source list does not match the clips".into()));
        }
        let failures: Vec<(usize, FailureKind, String)> =
            serde_json::from_slice(&map[failures.range()])
                .map_err(|e| Some(format!("unreadable failure list: {e}")))?;
        if failures.iter().any(|(i, _, _)| *i >= files.len()) {
            return Err(Some("failure list names a file out of range".into()));
        }
        let failures = failures
            .into_iter()
            .map(|(index, kind, reason)| ClipFailure {
                index,
                path: files[index].path.clone(),
                kind,
                reason,
            })
            .collect();
        Ok(ArenaLoader {
            arena: Arc::new(MappedArena {
                map,
                len: clips * clip_samples,
            }),
            indices,
            sources,
            failures,
            clip_samples,
            batch_clips: 1,
            next: 0,
            name: "memmap",
            stats: LoaderStats::default(),
            outcome: Some(CacheOutcome::Hit),
        })
    }
}

/// Decodes `files` into a new cache file at `key.path` (temporary name, then rename).
fn build(
    key: &CacheKey,
    files: &[FileEntry],
    audio: &AudioConfig,
    on_file: &(dyn Fn() -> bool + Sync),
) -> Result<()> {
    atomic::remove_stale_partials(&key.path);
    let (staged, mut file) = Staged::file(&key.path)?;
    let temp = staged.path().to_path_buf();
    let io = |e: std::io::Error| Error::io(&temp, e);
    let clip_samples = audio.clip_samples();
    let clip_bytes = clip_samples * 4;
    let size = (HEADER + files.len() * clip_bytes) as u64;
    file.set_len(size).map_err(io)?;
    // Every block the map will write is allocated now: a full disk is an error here,
    // naming the disk, rather than a SIGBUS at the first page that finds no space.
    reserve(&file, size).map_err(|e| full_disk(&temp, size, e))?;
    // SAFETY: the temporary file is ours alone until it is renamed.
    let mut map = unsafe { MmapMut::map_mut(&file) }.map_err(io)?;
    let arena: &mut [f32] = bytemuck::cast_slice_mut(&mut map[HEADER..]);
    let outcomes: Vec<Result<SourceInfo>> = arena
        .par_chunks_mut(clip_samples.max(1))
        .zip(files.par_iter())
        .map_init(Vec::new, |buf, (row, f)| {
            if !on_file() {
                return Err(Error::Cancelled);
            }
            load_clip(&f.path, audio, DEFAULT_READ, row, buf)
        })
        .collect();
    let (ok, sources, failures) = sort_outcomes(outcomes, files)?;
    let indices: Vec<u32> = (0..files.len() as u32)
        .filter(|&i| ok[i as usize])
        .collect();
    let failures: Vec<(usize, FailureKind, String)> = failures
        .into_iter()
        .map(|f| (f.index, f.kind, f.reason))
        .collect();
    let sources = serde_json::to_vec(&sources).expect("sources serialise");
    let clips = crate::arena::compact(arena, clip_samples, &ok);
    let arena_end = HEADER + clips * clip_bytes;
    let sums = container::u64s_to_bytes(&arena_checksums(&map[HEADER..arena_end], clip_bytes));
    map.flush().map_err(io)?;
    drop(map);
    file.set_len(arena_end as u64).map_err(io)?;
    let index: Vec<u8> = indices.iter().flat_map(|i| i.to_le_bytes()).collect();
    let failures = serde_json::to_vec(&failures).expect("failures serialise");
    let mut sections = Vec::new();
    let mut at = HEADER as u64;
    for (len, checksum) in [
        (arena_end - HEADER, container::checksum(&sums)),
        (sums.len(), container::checksum(&sums)),
        (index.len(), container::checksum(&index)),
        (failures.len(), container::checksum(&failures)),
        (sources.len(), container::checksum(&sources)),
    ] {
        sections.push(Section {
            offset: at,
            len: len as u64,
            checksum,
        });
        at += len as u64;
    }
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(arena_end as u64)).map_err(io)?;
    for part in [&sums, &index, &failures, &sources] {
        file.write_all(part).map_err(io)?;
    }
    let header = container::encode(MAGIC, VERSION, key.fingerprint, &sections, HEADER);
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    file.write_all(&header).map_err(io)?;
    drop(file);
    staged.commit(true)?;
    Ok(())
}

/// Allocates the first `bytes` of `file` on disk (`posix_fallocate`). Where the
/// filesystem cannot (`EOPNOTSUPP`), zeros are written instead: either way, every block a
/// later write through a map touches exists, or this fails (`ENOSPC`).
fn reserve(file: &File, bytes: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    // SAFETY: a valid open descriptor; the call only allocates blocks for it.
    let r = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, bytes as libc::off_t) };
    match r {
        0 => Ok(()),
        libc::EOPNOTSUPP | libc::EINVAL => {
            let zeros = vec![0u8; 1 << 20];
            let mut at = 0;
            while at < bytes {
                let n = (bytes - at).min(zeros.len() as u64) as usize;
                file.write_all_at(&zeros[..n], at)?;
                at += n as u64;
            }
            Ok(())
        }
        e => Err(std::io::Error::from_raw_os_error(e)),
    }
}

/// The error for a cache that cannot be given `bytes` of disk at `temp`: a full disk is
/// called a full disk, with the folder and the size.
fn full_disk(temp: &Path, bytes: u64, e: std::io::Error) -> Error {
    let dir = temp.parent().unwrap_or(Path::new("."));
    let why = if e.raw_os_error() == Some(libc::ENOSPC) || e.raw_os_error() == Some(libc::EDQUOT) {
        format!(
            "the disk holding the cache folder {} is full: the decoded-audio cache needs {bytes} bytes ({e}); free space there, or choose another cache folder",
            dir.display()
        )
    } else {
        format!("reserving {bytes} bytes of disk for the decoded-audio cache: {e}")
    };
    Error::output(temp, why)
}
