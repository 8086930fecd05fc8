//! melctl's checksummed container format, shared by every binary file it writes for
//! itself (the memmap cache of decoded audio, the resume journal's batches).
//!
//! ```text
//! magic [8] | version u32 | section count u32 | fingerprint u128 |
//! sections: count × (offset u64, length u64, xxh3-64 u64) | xxh3-64 of all the above u64 |
//! zero padding to the header length | sections, in order, contiguous
//! ```
//!
//! Every byte a reader uses is covered by a checksum verified before use: the header by
//! its own, each section by its entry. A section too large to verify at once (the cache's
//! arena) is covered by a section of chunk checksums ([`chunk_checksums`]) whose own
//! entry covers it. Reading checks the magic, version, section count bound, layout
//! (sections contiguous from the header to the end of the file) and then the checksums;
//! nothing is sized by the file before those bounds hold.

use xxhash_rust::xxh3::xxh3_64;

/// Sections a header may list at most (a bound on what a damaged header can ask for).
pub const MAX_SECTIONS: usize = 16;

/// Bytes of a header with `sections` entries, before padding.
pub fn header_len(sections: usize) -> usize {
    8 + 4 + 4 + 16 + sections * 24 + 8
}

/// One section: where it lies and its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    /// Offset from the start of the file.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// xxh3-64 of its bytes.
    pub checksum: u64,
}

impl Section {
    /// The byte range of the section.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.offset as usize..(self.offset + self.len) as usize
    }
}

/// A decoded, checked header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// What the file was made from (settings, inputs); compared by the reader.
    pub fingerprint: u128,
    /// The sections in file order.
    pub sections: Vec<Section>,
}

/// Why a container cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContainerError {
    /// Shorter than its header.
    #[error("truncated: {0} bytes, shorter than its header")]
    Truncated(usize),
    /// Not this kind of file.
    #[error("not a melctl {0} file (bad magic)")]
    Magic(&'static str),
    /// Another format version.
    #[error("format version {found} (this melctl reads {expected})")]
    Version {
        /// In the file.
        found: u32,
        /// What this build reads.
        expected: u32,
    },
    /// The file is shorter or longer than its sections say.
    #[error("truncated or extended: the sections end at {sections_end}, the file at {file_len}")]
    Length {
        /// Where the sections end.
        sections_end: u64,
        /// The file's length.
        file_len: u64,
    },
    /// The header's checksum does not match.
    #[error("header checksum mismatch (damaged header)")]
    HeaderChecksum,
    /// Sections out of bounds, overlapping, with gaps, or not ending at the end of the file.
    #[error("inconsistent layout: {0}")]
    Layout(String),
    /// A section's bytes do not match its checksum.
    #[error("checksum mismatch in {0} (corrupted)")]
    Checksum(String),
}

/// Encodes a header for `sections` (in file order), zero-padded to `padded_len` bytes
/// (at least [`header_len`]; the cache pads to a page so its arena is aligned).
pub fn encode(
    magic: &[u8; 8],
    version: u32,
    fingerprint: u128,
    sections: &[Section],
    padded_len: usize,
) -> Vec<u8> {
    assert!(sections.len() <= MAX_SECTIONS, "too many sections");
    let mut b = Vec::with_capacity(padded_len.max(header_len(sections.len())));
    b.extend_from_slice(magic);
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    b.extend_from_slice(&fingerprint.to_le_bytes());
    for s in sections {
        b.extend_from_slice(&s.offset.to_le_bytes());
        b.extend_from_slice(&s.len.to_le_bytes());
        b.extend_from_slice(&s.checksum.to_le_bytes());
    }
    let sum = xxh3_64(&b);
    b.extend_from_slice(&sum.to_le_bytes());
    b.resize(padded_len.max(b.len()), 0);
    b
}

/// Decodes and checks the header at the start of `file` (the whole file, or at least its
/// header when `file_len` is given separately): magic, version, the header checksum, and
/// that the sections are contiguous from `data_start` to `file_len`. Section checksums
/// are checked by [`verify`] (separately, so large sections can be checked in parallel).
pub fn decode(
    file: &[u8],
    file_len: u64,
    magic: &[u8; 8],
    kind: &'static str,
    version: u32,
    data_start: u64,
) -> Result<Header, ContainerError> {
    let fixed = header_len(0);
    if file.len() < fixed {
        return Err(ContainerError::Truncated(file.len()));
    }
    if &file[..8] != magic {
        return Err(ContainerError::Magic(kind));
    }
    let u32_at = |o: usize| u32::from_le_bytes(file[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_le_bytes(file[o..o + 8].try_into().expect("8 bytes"));
    let found = u32_at(8);
    if found != version {
        return Err(ContainerError::Version {
            found,
            expected: version,
        });
    }
    let count = u32_at(12) as usize;
    if count > MAX_SECTIONS {
        return Err(ContainerError::Layout(format!(
            "{count} sections (at most {MAX_SECTIONS})"
        )));
    }
    let end = header_len(count) - 8;
    if file.len() < end + 8 {
        return Err(ContainerError::Truncated(file.len()));
    }
    if xxh3_64(&file[..end]) != u64_at(end) {
        return Err(ContainerError::HeaderChecksum);
    }
    let fingerprint = u128::from_le_bytes(file[16..32].try_into().expect("16 bytes"));
    let sections: Vec<Section> = (0..count)
        .map(|i| {
            let o = 32 + 24 * i;
            Section {
                offset: u64_at(o),
                len: u64_at(o + 8),
                checksum: u64_at(o + 16),
            }
        })
        .collect();
    let mut at = data_start;
    for (i, s) in sections.iter().enumerate() {
        if s.offset != at {
            return Err(ContainerError::Layout(format!(
                "section {i} starts at {} where {at} was expected",
                s.offset
            )));
        }
        at = s.offset.checked_add(s.len).ok_or_else(|| {
            ContainerError::Layout(format!("section {i} is longer than any file"))
        })?;
    }
    if at != file_len {
        return Err(ContainerError::Length {
            sections_end: at,
            file_len,
        });
    }
    Ok(Header {
        fingerprint,
        sections,
    })
}

/// Checks `bytes` (the section's bytes) against its entry; `name` is for the message.
pub fn verify(bytes: &[u8], section: &Section, name: &str) -> Result<(), ContainerError> {
    if bytes.len() as u64 != section.len || xxh3_64(bytes) != section.checksum {
        return Err(ContainerError::Checksum(name.to_string()));
    }
    Ok(())
}

/// The checksum of a section's bytes.
pub fn checksum(bytes: &[u8]) -> u64 {
    xxh3_64(bytes)
}

/// One xxh3-64 per `chunk` bytes of `bytes` (the last chunk may be shorter), as the
/// little-endian bytes of a section that covers a large one.
pub fn chunk_checksums(bytes: &[u8], chunk: usize) -> Vec<u64> {
    bytes.chunks(chunk.max(1)).map(xxh3_64).collect()
}

/// `u64`s as little-endian bytes.
pub fn u64s_to_bytes(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Little-endian bytes as `u64`s (a trailing partial word is ignored).
pub fn bytes_to_u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAGIC: &[u8; 8] = b"MELTEST1";

    fn file() -> Vec<u8> {
        let a = b"hello sections".to_vec();
        let b = vec![7u8; 100];
        let start = 512u64;
        let sections = [
            Section {
                offset: start,
                len: a.len() as u64,
                checksum: checksum(&a),
            },
            Section {
                offset: start + a.len() as u64,
                len: b.len() as u64,
                checksum: checksum(&b),
            },
        ];
        let mut f = encode(MAGIC, 3, 42, &sections, start as usize);
        f.extend_from_slice(&a);
        f.extend_from_slice(&b);
        f
    }

    fn open(f: &[u8]) -> Result<Header, ContainerError> {
        let h = decode(f, f.len() as u64, MAGIC, "test", 3, 512)?;
        for (i, s) in h.sections.iter().enumerate() {
            verify(&f[s.range()], s, &format!("section {i}"))?;
        }
        Ok(h)
    }

    #[test]
    fn a_written_container_reads_back() {
        let f = file();
        let h = open(&f).unwrap();
        assert_eq!(h.fingerprint, 42);
        assert_eq!(&f[h.sections[0].range()], b"hello sections");
    }

    #[test]
    fn every_flipped_byte_and_every_truncation_is_detected() {
        let good = file();
        let used = header_len(2);
        for i in (0..used).chain(512..good.len()) {
            let mut f = good.clone();
            f[i] ^= 0x20;
            assert!(open(&f).is_err(), "flipped byte {i} went unnoticed");
        }
        for len in 0..good.len() {
            assert!(
                open(&good[..len]).is_err(),
                "truncation to {len} went unnoticed"
            );
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(matches!(open(&longer), Err(ContainerError::Length { .. })));
        assert!(matches!(
            decode(&good, good.len() as u64, MAGIC, "test", 4, 512),
            Err(ContainerError::Version { found: 3, .. })
        ));
    }
}
