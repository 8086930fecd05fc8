//! The memmap-cache loader. The first run decodes a split into a cache file; later
//! runs map it (memmap2) and skip decoding entirely.
//!
//! File layout (little-endian):
//! ```text
//! 0      header, 4096 bytes: magic "MELCACHE", version, fingerprint (xxh3-128),
//!        clip_samples, files, clips, section offsets, header checksum
//! 4096   arena: clips × clip_samples f32, in file order, failed files left out
//! ...    index: clips × u32 (the file index of each cached clip)
//! ...    failures: JSON [[index, reason], ...]
//! ...    checksums: one xxh3-64 per CHUNK_CLIPS clips of the arena
//! ```
//! The fingerprint covers the format version, the audio settings and every file's
//! relative path, label, size and modification time: any change rebuilds the cache.
//! A truncated file, a damaged header or a checksum mismatch also rebuilds it; a
//! cache that fails a check is never used.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use mel_audio::FileEntry;
use mel_core::config::AudioConfig;
use mel_core::{
    ClipBatch, ClipFailure, Error, FailureKind, Loader, LoaderStats, Result, SampleBlock,
    SampleStore,
};
use memmap2::{Mmap, MmapMut};
use rayon::prelude::*;
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use crate::io::{DEFAULT_READ, load_clip};

const MAGIC: &[u8; 8] = b"MELCACHE";
const VERSION: u32 = 2;
const HEADER: usize = 4096;
/// Clips per arena checksum.
const CHUNK_CLIPS: usize = 64;

/// What the loader found in the cache folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOutcome {
    /// A valid cache was mapped.
    Hit,
    /// There was no cache file; one was built.
    Miss,
    /// A cache file existed but was unusable (the reason); it was rebuilt.
    Rebuilt(String),
}

impl CacheOutcome {
    /// `hit`, `miss` or `rebuild`.
    pub fn kind(&self) -> &'static str {
        match self {
            CacheOutcome::Hit => "hit",
            CacheOutcome::Miss => "miss",
            CacheOutcome::Rebuilt(_) => "rebuild",
        }
    }
}

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

/// The default cache folder: `$XDG_CACHE_HOME/melctl`, else `~/.cache/melctl`.
pub fn default_cache_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("melctl");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(h).join(".cache").join("melctl");
    }
    std::env::temp_dir().join("melctl-cache")
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

/// The decoded header fields.
#[derive(Debug, Clone, Copy)]
struct Header {
    fingerprint: u128,
    clip_samples: u64,
    files: u64,
    clips: u64,
    index_offset: u64,
    failures_offset: u64,
    failures_len: u64,
    checksums_offset: u64,
    total_len: u64,
}

impl Header {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&self.fingerprint.to_le_bytes());
        for v in [
            self.clip_samples,
            self.files,
            self.clips,
            self.index_offset,
            self.failures_offset,
            self.failures_len,
            self.checksums_offset,
            self.total_len,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let sum = xxh3_64(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        b.resize(HEADER, 0);
        b
    }

    fn decode(b: &[u8]) -> std::result::Result<Header, String> {
        if b.len() < HEADER {
            return Err(format!("truncated: {} bytes, not even a header", b.len()));
        }
        if &b[..8] != MAGIC {
            return Err("not a melctl cache file (bad magic)".into());
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        if u32_at(8) != VERSION {
            return Err(format!(
                "cache format version {} (this melctl writes {VERSION})",
                u32_at(8)
            ));
        }
        let end = 32 + 8 * 8;
        if xxh3_64(&b[..end]) != u64_at(end) {
            return Err("header checksum mismatch (damaged header)".into());
        }
        Ok(Header {
            fingerprint: u128::from_le_bytes(b[16..32].try_into().expect("16 bytes")),
            clip_samples: u64_at(32),
            files: u64_at(40),
            clips: u64_at(48),
            index_offset: u64_at(56),
            failures_offset: u64_at(64),
            failures_len: u64_at(72),
            checksums_offset: u64_at(80),
            total_len: u64_at(88),
        })
    }
}

/// Checksums of the arena, one per `CHUNK_CLIPS` clips, computed in parallel.
fn arena_checksums(arena: &[u8], clip_bytes: usize) -> Vec<u64> {
    arena
        .par_chunks((CHUNK_CLIPS * clip_bytes).max(1))
        .map(xxh3_64)
        .collect()
}

/// The memmap-cache loader.
pub struct CacheLoader {
    arena: Arc<MappedArena>,
    indices: Vec<usize>,
    failures: Vec<ClipFailure>,
    clip_samples: usize,
    batch_clips: usize,
    next: usize,
    outcome: CacheOutcome,
    note: String,
}

impl CacheLoader {
    /// Maps the cache for `files` at `key`, building (or rebuilding) it first when it is
    /// missing or unusable. Decoding runs in the current rayon pool; `progress` is called
    /// once per decoded file.
    pub fn open(
        key: &CacheKey,
        files: &[FileEntry],
        audio: &AudioConfig,
        batch_clips: usize,
        progress: &(dyn Fn() + Sync),
    ) -> Result<Self> {
        let clip_samples = audio.clip_samples();
        let t0 = Instant::now();
        let outcome = match Self::map_valid(key, files, clip_samples) {
            Ok(loader) => {
                let mut l = loader;
                l.batch_clips = batch_clips.max(1);
                l.note = format!(
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
        build(key, files, audio, progress)?;
        let mut l = Self::map_valid(key, files, clip_samples).map_err(|why| Error::Io {
            path: key.path.clone(),
            source: std::io::Error::other(format!(
                "the cache just written does not check out: {}",
                why.unwrap_or_else(|| "missing".into())
            )),
        })?;
        l.batch_clips = batch_clips.max(1);
        l.note = match &outcome {
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
        l.outcome = outcome;
        Ok(l)
    }

    /// Maps the cache if it exists and passes every check. `Err(None)`: no file;
    /// `Err(Some(reason))`: a file that must be rebuilt.
    fn map_valid(
        key: &CacheKey,
        files: &[FileEntry],
        clip_samples: usize,
    ) -> std::result::Result<Self, Option<String>> {
        let file = match File::open(&key.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(None),
            Err(e) => return Err(Some(format!("cannot open: {e}"))),
        };
        // SAFETY: the cache file is private to melctl and replaced only by rename, so the
        // mapped inode is never modified underneath us by melctl itself.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Some(format!("cannot map: {e}")))?;
        let h = Header::decode(&map)?;
        if h.fingerprint != key.fingerprint {
            return Err(Some(
                "the files or audio settings changed since the cache was built (fingerprint differs)"
                    .into(),
            ));
        }
        if h.total_len != map.len() as u64 {
            return Err(Some(format!(
                "truncated or extended: {} bytes, the header says {}",
                map.len(),
                h.total_len
            )));
        }
        if h.clip_samples != clip_samples as u64 || h.files != files.len() as u64 {
            return Err(Some("clip length or file count differs".into()));
        }
        let clips = h.clips as usize;
        let clip_bytes = clip_samples * 4;
        let arena_end = HEADER + clips * clip_bytes;
        let sections_ok = h.index_offset as usize == arena_end
            && h.failures_offset as usize == arena_end + clips * 4
            && h.checksums_offset == h.failures_offset + h.failures_len
            && h.checksums_offset as usize + clips.div_ceil(CHUNK_CLIPS) * 8 == map.len();
        if !sections_ok {
            return Err(Some("section offsets are inconsistent".into()));
        }
        let stored: Vec<u64> = map[h.checksums_offset as usize..]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let actual = arena_checksums(&map[HEADER..arena_end], clip_bytes);
        if let Some(bad) = stored.iter().zip(&actual).position(|(a, b)| a != b) {
            return Err(Some(format!(
                "checksum mismatch in clips {}..{} (corrupted)",
                bad * CHUNK_CLIPS,
                ((bad + 1) * CHUNK_CLIPS).min(clips)
            )));
        }
        let indices: Vec<usize> = map[arena_end..h.failures_offset as usize]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")) as usize)
            .collect();
        let failures: Vec<(usize, FailureKind, String)> =
            serde_json::from_slice(&map[h.failures_offset as usize..h.checksums_offset as usize])
                .map_err(|e| Some(format!("unreadable failure list: {e}")))?;
        if indices.windows(2).any(|w| w[0] >= w[1]) || indices.iter().any(|&i| i >= files.len()) {
            return Err(Some("index is not increasing or out of range".into()));
        }
        let failures = failures
            .into_iter()
            .filter(|(i, _, _)| *i < files.len())
            .map(|(index, kind, reason)| ClipFailure {
                index,
                path: files[index].path.clone(),
                kind,
                reason,
            })
            .collect();
        Ok(CacheLoader {
            arena: Arc::new(MappedArena {
                map,
                len: clips * clip_samples,
            }),
            indices,
            failures,
            clip_samples,
            batch_clips: 1,
            next: 0,
            outcome: CacheOutcome::Hit,
            note: String::new(),
        })
    }

    /// Whether the cache was hit, missed or rebuilt (and why).
    pub fn outcome(&self) -> &CacheOutcome {
        &self.outcome
    }

    /// Clips held.
    pub fn clips(&self) -> usize {
        self.indices.len()
    }
}

/// Decodes `files` into a new cache file at `key.path` (temporary name, then rename).
fn build(
    key: &CacheKey,
    files: &[FileEntry],
    audio: &AudioConfig,
    progress: &(dyn Fn() + Sync),
) -> Result<()> {
    let dir = key.path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let temp = key.path.with_file_name(format!(
        ".{}.partial-{}",
        key.path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let guard = TempGuard(temp.clone());
    let io = |e: std::io::Error| Error::io(&temp, e);
    let clip_samples = audio.clip_samples();
    let clip_bytes = clip_samples * 4;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)
        .map_err(io)?;
    file.set_len((HEADER + files.len() * clip_bytes) as u64)
        .map_err(io)?;
    // SAFETY: the temporary file is ours alone until it is renamed.
    let mut map = unsafe { MmapMut::map_mut(&file) }.map_err(io)?;
    let arena: &mut [f32] = bytemuck::cast_slice_mut(&mut map[HEADER..]);
    let outcomes: Vec<Option<Error>> = arena
        .par_chunks_mut(clip_samples.max(1))
        .zip(files.par_iter())
        .map_init(Vec::new, |buf, (row, f)| {
            let r = load_clip(&f.path, audio, DEFAULT_READ, row, buf);
            progress();
            r.err()
        })
        .collect();
    let ok: Vec<bool> = outcomes.iter().map(Option::is_none).collect();
    let indices: Vec<u32> = (0..files.len() as u32)
        .filter(|&i| ok[i as usize])
        .collect();
    let failures: Vec<(usize, FailureKind, String)> = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.as_ref().map(|e| (i, e.failure_kind(), e.reason())))
        .collect();
    let clips = crate::arena::compact(arena, clip_samples, &ok);
    let arena_end = HEADER + clips * clip_bytes;
    let sums = arena_checksums(&map[HEADER..arena_end], clip_bytes);
    map.flush().map_err(io)?;
    drop(map);
    file.set_len(arena_end as u64).map_err(io)?;
    let failures_json = serde_json::to_vec(&failures).expect("failures serialise");
    let index_offset = arena_end as u64;
    let failures_offset = index_offset + clips as u64 * 4;
    let checksums_offset = failures_offset + failures_json.len() as u64;
    let total_len = checksums_offset + sums.len() as u64 * 8;
    let mut tail = Vec::with_capacity((total_len - index_offset) as usize);
    tail.extend(indices.iter().flat_map(|i| i.to_le_bytes()));
    tail.extend_from_slice(&failures_json);
    tail.extend(sums.iter().flat_map(|s| s.to_le_bytes()));
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(index_offset)).map_err(io)?;
    file.write_all(&tail).map_err(io)?;
    let header = Header {
        fingerprint: key.fingerprint,
        clip_samples: clip_samples as u64,
        files: files.len() as u64,
        clips: clips as u64,
        index_offset,
        failures_offset,
        failures_len: failures_json.len() as u64,
        checksums_offset,
        total_len,
    };
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    file.write_all(&header.encode()).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    std::fs::rename(&temp, &key.path).map_err(|e| Error::io(&key.path, e))?;
    std::mem::forget(guard);
    Ok(())
}

/// Removes a temporary file unless forgotten.
struct TempGuard(PathBuf);

impl Drop for TempGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Loader for CacheLoader {
    fn name(&self) -> &str {
        "memmap"
    }

    fn next_batch(&mut self) -> Option<Result<ClipBatch>> {
        if self.next >= self.indices.len() {
            return None;
        }
        let end = (self.next + self.batch_clips).min(self.indices.len());
        let batch = ClipBatch {
            indices: self.indices[self.next..end].to_vec(),
            samples: SampleBlock::new(
                self.arena.clone(),
                self.next * self.clip_samples,
                (end - self.next) * self.clip_samples,
            ),
        };
        self.next = end;
        Some(Ok(batch))
    }

    fn failures(&self) -> &[ClipFailure] {
        &self.failures
    }

    fn stats(&self) -> LoaderStats {
        LoaderStats {
            note: self.note.clone(),
            ..LoaderStats::default()
        }
    }
}
