//! Reading whole files the way a streaming loader wants: `O_NOATIME` (no access-time
//! write per file), `posix_fadvise` hints, and a fixed read size into a reused buffer.

use std::io::Read;

use mel_core::{ClipFailure, SourceInfo};
use std::path::Path;

/// How files are opened and read.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Bytes asked of the kernel per `read` call.
    pub read_size: usize,
    /// Try `O_NOATIME` first (falls back silently where the OS refuses, e.g. not the owner).
    pub noatime: bool,
    /// Hint sequential, read-once access.
    pub fadvise: bool,
}

/// Reads the whole of `path` into `buf` (its old contents replaced; empty after an
/// error), at most `limit` bytes. Returns the file's full length, which may exceed what
/// was read when it is above `limit`.
pub fn read_file(
    path: &Path,
    opts: ReadOptions,
    limit: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<u64> {
    let opened = mel_audio::open_input(path, opts.noatime).and_then(|f| {
        let len = f.metadata()?.len();
        Ok((f, len))
    });
    let (mut f, len) = opened.inspect_err(|_| buf.clear())?;
    #[cfg(target_os = "linux")]
    if opts.fadvise {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid open descriptor; the call only records a hint.
        unsafe {
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL);
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_NOREUSE);
        }
    }
    let want = len.min(limit) as usize;
    // The buffer is reused file after file and read into over its old bytes, so only
    // bytes it never held are zeroed (a reader thread's 82 KB WAVs: once, not per file).
    if buf.len() < want {
        buf.resize(want, 0);
    }
    let step = opts.read_size.max(4096);
    let mut filled = 0;
    while filled < want {
        let n = step.min(want - filled);
        match f.read(&mut buf[filled..filled + n]) {
            Ok(0) => break, // the file shrank under us: decode sees what is there
            Ok(got) => filled += got,
            Err(e) => {
                buf.clear();
                return Err(e);
            }
        }
    }
    buf.truncate(filled);
    Ok(len)
}

/// Reads `path` into `buf` and decodes it into `row` (files over a size bound are decoded
/// from the file, reading only the kept frames). Returns what the file was.
pub fn load_clip(
    path: &Path,
    audio: &mel_core::spec::AudioConfig,
    opts: ReadOptions,
    row: &mut [f32],
    buf: &mut Vec<u8>,
) -> mel_core::Result<SourceInfo> {
    if path.file_name().is_none() {
        // `.`, `..`, `x/..`: a folder's spelling, not a file's.
        return Err(mel_core::Error::unsupported(
            path,
            "the path names no file (it ends in . or ..); name the audio file",
        ));
    }
    if path.file_name().and_then(|n| n.to_str()).is_none() {
        // The output's `path` list must name every clip exactly, in UTF-8.
        return Err(mel_core::Error::unsupported(
            path,
            "the file name is not valid UTF-8, so the output could not name it exactly; rename the file",
        ));
    }
    let limit = read_limit(row.len());
    let len = read_file(path, opts, limit, buf).map_err(|e| mel_core::Error::read(path, e))?;
    let info = if len > limit {
        mel_audio::decode_into(path, audio, row)?
    } else {
        mel_audio::decode_bytes_into(buf, path, audio, row)?
    };
    Ok(SourceInfo {
        rate: info.rate,
        channels: info.channels,
        frames: info.frames as u64,
    })
}

/// The outcome of loading every file of a list into rows: which rows hold clips, the
/// sources of those (in order), and the failures (`Err(Cancelled)` if any load was
/// cancelled).
pub(crate) fn sort_outcomes(
    outcomes: Vec<mel_core::Result<SourceInfo>>,
    files: &[mel_audio::FileEntry],
) -> mel_core::Result<(Vec<bool>, Vec<SourceInfo>, Vec<ClipFailure>)> {
    let mut ok = Vec::with_capacity(outcomes.len());
    let mut sources = Vec::new();
    let mut failures = Vec::new();
    for (i, o) in outcomes.into_iter().enumerate() {
        match o {
            Ok(s) => {
                ok.push(true);
                sources.push(s);
            }
            Err(mel_core::Error::Cancelled) => return Err(mel_core::Error::Cancelled),
            Err(e) => {
                ok.push(false);
                failures.push(ClipFailure::from_error(i, &files[i].path, &e));
            }
        }
    }
    Ok((ok, sources, failures))
}

/// Files up to this many bytes are read whole; longer ones are decoded from the file
/// (no allocation proportional to a file far longer than the clip).
pub fn read_limit(clip_samples: usize) -> u64 {
    (1 << 16) + clip_samples as u64 * 16
}

/// Plain reads: no hints, 1 MiB at a time.
pub const DEFAULT_READ: ReadOptions = ReadOptions {
    read_size: 1 << 20,
    noatime: true,
    fadvise: false,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest row `..` or `x/..` was "the file name is not valid UTF-8".
    #[test]
    fn a_path_that_names_no_file_says_so() {
        let t = tempfile::tempdir().unwrap();
        let audio = mel_core::spec::AudioConfig::default();
        let mut row = vec![0.0f32; audio.clip_samples()];
        for p in [t.path().join(".."), t.path().join("x/..")] {
            let e = load_clip(&p, &audio, DEFAULT_READ, &mut row, &mut Vec::new())
                .unwrap_err()
                .to_string();
            assert!(e.contains("names no file"), "{e}");
        }
    }

    #[test]
    fn reads_whole_files_in_small_steps_and_honours_the_limit() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("x.bin");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let opts = ReadOptions {
            read_size: 4096,
            noatime: true,
            fadvise: true,
        };
        let mut buf = vec![7u8; 10];
        assert_eq!(read_file(&p, opts, u64::MAX, &mut buf).unwrap(), 100_000);
        assert_eq!(buf, data);
        assert_eq!(read_file(&p, opts, 5000, &mut buf).unwrap(), 100_000);
        assert_eq!(buf, data[..5000]);
        assert!(read_file(&t.path().join("missing"), opts, 10, &mut buf).is_err());
        assert!(
            buf.is_empty(),
            "a failed read leaves no bytes of an earlier file"
        );
    }

    /// The buffer is read into over an earlier file's bytes: a shorter file after a longer
    /// one must leave exactly its own bytes, none of the longer file's tail.
    #[test]
    fn a_shorter_file_after_a_longer_one_leaves_only_its_own_bytes() {
        let t = tempfile::tempdir().unwrap();
        let (long, short) = (t.path().join("long"), t.path().join("short"));
        std::fs::write(&long, vec![0xAAu8; 9000]).unwrap();
        std::fs::write(&short, vec![0x55u8; 3000]).unwrap();
        let mut buf = Vec::new();
        for (path, byte, n) in [
            (&long, 0xAA, 9000),
            (&short, 0x55, 3000),
            (&long, 0xAA, 9000),
        ] {
            assert_eq!(
                read_file(path, DEFAULT_READ, u64::MAX, &mut buf).unwrap(),
                n
            );
            assert_eq!(buf.len(), n as usize);
            assert!(buf.iter().all(|&b| b == byte));
        }
    }
}
