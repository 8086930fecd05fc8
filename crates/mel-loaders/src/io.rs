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

/// Reads the whole of `path` into `buf` (cleared first), at most `limit` bytes.
/// Returns the file's full length, which may exceed what was read when it is above `limit`.
pub fn read_file(
    path: &Path,
    opts: ReadOptions,
    limit: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<u64> {
    buf.clear();
    let mut f = mel_audio::open_input(path, opts.noatime)?;
    let len = f.metadata()?.len();
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
    buf.reserve(want);
    let step = opts.read_size.max(4096);
    while buf.len() < want {
        let start = buf.len();
        let n = step.min(want - start);
        buf.resize(start + n, 0);
        let got = f.read(&mut buf[start..])?;
        buf.truncate(start + got);
        if got == 0 {
            break; // the file shrank under us: decode sees what is there
        }
    }
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
    }
}
