//! Byte-level checks of the framing that symphonia's readers resynchronise across without
//! a word. A reader that meets damaged data (an Ogg page failing its CRC, an ADTS frame
//! without its sync word, a FLAC frame failing its CRC) skips to the next thing that looks
//! like a frame and carries on, so a file missing frames in the middle decoded shifted with
//! exit 0; a file cut inside its last Ogg page or ADTS frame ended a frame early. These
//! walks find such damage from the bytes alone, before any decoder sees them, and name it;
//! FLAC, whose frames carry their own numbers, is checked on the packets instead
//! ([`crate::symphonia_read`]). A trailing ID3v1 or APEv2 tag after a raw stream (FLAC, MP3,
//! ADTS) is not audio: [`audio_end`] finds where the stream ends before it, and the reader
//! is bounded there (ffmpeg, sox and libsndfile read every frame of such files).

use std::io::{Read, Seek, SeekFrom};

use crate::sniff::read_at;

/// Where the audio of a raw stream starting at `start` ends in a file of `len` bytes: before
/// any ID3v1 tag (`TAG` and 125 bytes, the file's last 128) and APEv2 tag (an `APETAGEX`
/// footer, its size, and an optional header) at its end.
pub(crate) fn audio_end<R: Read + Seek>(r: &mut R, start: u64, len: u64) -> std::io::Result<u64> {
    let mut end = len;
    // ID3v1 normally follows an APEv2 tag; either may be there alone.
    for _ in 0..3 {
        if end >= start + 128 && read_at(r, end - 128, 3)? == b"TAG" {
            end -= 128;
            continue;
        }
        if end >= start + 32 {
            let footer = read_at(r, end - 32, 32)?;
            if footer.len() == 32 && &footer[..8] == b"APETAGEX" {
                let size = u32::from_le_bytes(footer[12..16].try_into().unwrap()) as u64;
                let flags = u32::from_le_bytes(footer[20..24].try_into().unwrap());
                // `size` counts the items and the footer; a header adds 32 bytes.
                let total = size + if flags & 0x8000_0000 != 0 { 32 } else { 0 };
                if total >= 32 && end - start >= total {
                    end -= total;
                    continue;
                }
            }
        }
        break;
    }
    Ok(end)
}

/// The Ogg CRC-32 (polynomial 0x04c11db7, not reflected, initial value 0).
const OGG_CRC: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = (i as u32) << 24;
        let mut k = 0;
        while k < 8 {
            c = if c & 0x8000_0000 != 0 {
                (c << 1) ^ 0x04c1_1db7
            } else {
                c << 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

fn ogg_crc(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0u32, |crc, &b| {
        (crc << 8) ^ OGG_CRC[((crc >> 24) as u8 ^ b) as usize]
    })
}

/// Walks the Ogg pages from `start` to `len`: each must start where the last ended, be
/// whole, pass its CRC and follow the previous page of its stream in sequence, and every
/// stream must end with its end-of-stream page. `Err` is the one-line reason.
pub(crate) fn ogg_pages<R: Read + Seek>(
    r: &mut R,
    start: u64,
    len: u64,
) -> std::io::Result<Result<(), String>> {
    let mut pos = start;
    let mut page = 0u64;
    // (serial, last sequence number, ended)
    let mut streams: Vec<(u32, u32, bool)> = Vec::new();
    let mut buf = Vec::new();
    while pos < len {
        let head = read_at(r, pos, 27)?;
        if head.len() < 4 || &head[..4] != b"OggS" {
            return Ok(Err(format!(
                "corrupt audio data: no Ogg page where page {page} should start, at byte {pos} (damaged data the reader would skip)"
            )));
        }
        if head.len() < 27 {
            return Ok(Err(format!(
                "truncated: the file ends inside the header of Ogg page {page} (byte {pos})"
            )));
        }
        let segments = head[26] as usize;
        let table = read_at(r, pos + 27, segments)?;
        let body: u64 = table.iter().map(|&s| s as u64).sum();
        let size = 27 + segments as u64 + body;
        if table.len() < segments || pos + size > len {
            return Ok(Err(format!(
                "truncated: the file ends inside Ogg page {page} (bytes {pos} to {}, the file has {len})",
                pos + size
            )));
        }
        buf.clear();
        r.seek(SeekFrom::Start(pos))?;
        r.by_ref().take(size).read_to_end(&mut buf)?;
        if (buf.len() as u64) < size {
            return Ok(Err(format!(
                "truncated: the file ends inside Ogg page {page} (byte {pos})"
            )));
        }
        let want = u32::from_le_bytes(buf[22..26].try_into().unwrap());
        buf[22..26].fill(0);
        if ogg_crc(&buf) != want {
            return Ok(Err(format!(
                "corrupt audio data: Ogg page {page} (byte {pos}) fails its CRC check (damaged data the reader would skip)"
            )));
        }
        let flags = head[5];
        let serial = u32::from_le_bytes(head[14..18].try_into().unwrap());
        let seq = u32::from_le_bytes(head[18..22].try_into().unwrap());
        match streams.iter_mut().find(|s| s.0 == serial) {
            Some(s) if s.2 => {
                return Ok(Err(format!(
                    "corrupt audio data: Ogg page {page} (byte {pos}) follows the end of its stream"
                )));
            }
            Some(s) if seq != s.1.wrapping_add(1) => {
                return Ok(Err(format!(
                    "corrupt audio data: Ogg page {page} (byte {pos}) has sequence number {seq} after {}: pages are missing",
                    s.1
                )));
            }
            Some(s) => {
                s.1 = seq;
                s.2 = flags & 4 != 0;
            }
            None => streams.push((serial, seq, flags & 4 != 0)),
        }
        pos += size;
        page += 1;
    }
    if streams.iter().any(|s| !s.2) {
        return Ok(Err(format!(
            "truncated: the Ogg stream ends after page {} without its end-of-stream page",
            page.saturating_sub(1)
        )));
    }
    Ok(Ok(()))
}

/// What a frame walk found where a frame should start.
enum Frame {
    /// A frame of this many bytes, header included.
    Len(u64),
    /// A frame whose header holds no length (free-format MP3): the walk stops there.
    Unmeasured,
    /// The stream ends inside the header.
    Cut,
    /// No frame header.
    NotAHeader,
    /// A header that cannot be right, and why (`says it is 3 bytes long`).
    Bad(String),
}

/// Walks the frames of a `name` stream (ADTS, MP3) from `start` to `end`: each must start
/// with a header (`header` bytes, read by `measure`, told whether the stream has fewer
/// left) where the last one said it ends, and the last must end at `end`. `Err` is the
/// one-line reason.
fn walk_frames<R: Read + Seek>(
    r: &mut R,
    start: u64,
    end: u64,
    name: &str,
    header: usize,
    measure: impl Fn(&[u8], bool) -> Frame,
) -> std::io::Result<Result<(), String>> {
    let mut pos = start;
    let mut frame = 0u64;
    while pos < end {
        let h = read_at(r, pos, header)?;
        let short = h.len() < header || pos + header as u64 > end;
        let len = match measure(&h, short) {
            Frame::Len(len) => len,
            Frame::Unmeasured => return Ok(Ok(())),
            Frame::Cut => {
                return Ok(Err(format!(
                    "truncated: the file ends inside the header of {name} frame {frame} (byte {pos})"
                )));
            }
            Frame::NotAHeader => {
                return Ok(Err(format!(
                    "corrupt audio data: no {name} frame header where frame {frame} should start, at byte {pos} (damaged data the reader would skip)"
                )));
            }
            Frame::Bad(why) => {
                return Ok(Err(format!(
                    "corrupt audio data: {name} frame {frame} (byte {pos}) {why}"
                )));
            }
        };
        if pos + len > end {
            return Ok(Err(format!(
                "truncated: the file ends inside {name} frame {frame} (bytes {pos} to {}, the stream has {end})",
                pos + len
            )));
        }
        pos += len;
        frame += 1;
    }
    Ok(Ok(()))
}

/// Walks the ADTS frames from `start` to `end` ([`walk_frames`]).
pub(crate) fn adts_frames<R: Read + Seek>(
    r: &mut R,
    start: u64,
    end: u64,
) -> std::io::Result<Result<(), String>> {
    walk_frames(r, start, end, "ADTS", 7, |h, short| {
        let synced = h.len() >= 2 && h[0] == 0xff && h[1] & 0xf6 == 0xf0;
        if !synced {
            return Frame::NotAHeader;
        }
        if short {
            return Frame::Cut;
        }
        let size = ((h[3] as u64 & 3) << 11) | ((h[4] as u64) << 3) | (h[5] as u64 >> 5);
        if size < 7 {
            return Frame::Bad(format!("says it is {size} bytes long"));
        }
        Frame::Len(size)
    })
}

/// The length in bytes of the MPEG audio frame whose header is `h` (4 bytes), `Ok(None)`
/// for a free-format frame (no length in its header), `Err` when `h` is no frame header.
fn mpeg_frame_len(h: &[u8]) -> Result<Option<u64>, ()> {
    if h.len() < 4 || h[0] != 0xff || h[1] & 0xe0 != 0xe0 {
        return Err(());
    }
    let version = (h[1] >> 3) & 3; // 0: MPEG 2.5, 2: MPEG 2, 3: MPEG 1
    let layer = (h[1] >> 1) & 3; // 1: III, 2: II, 3: I
    let bitrate_index = (h[2] >> 4) as usize;
    let rate_index = ((h[2] >> 2) & 3) as usize;
    let padding = ((h[2] >> 1) & 1) as u64;
    if version == 1 || layer == 0 || bitrate_index == 15 || rate_index == 3 {
        return Err(());
    }
    if bitrate_index == 0 {
        return Ok(None);
    }
    const KBPS_V1: [[u64; 15]; 3] = [
        [
            0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448,
        ],
        [
            0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384,
        ],
        [
            0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320,
        ],
    ];
    const KBPS_V2: [[u64; 15]; 2] = [
        [
            0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256,
        ],
        [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
    ];
    const RATES: [u64; 3] = [44100, 48000, 32000];
    let layer_row = (3 - layer) as usize; // 0: I, 1: II, 2: III
    let (kbps, rate) = match version {
        3 => (KBPS_V1[layer_row][bitrate_index], RATES[rate_index]),
        2 => (
            KBPS_V2[usize::from(layer_row > 0)][bitrate_index],
            RATES[rate_index] / 2,
        ),
        _ => (
            KBPS_V2[usize::from(layer_row > 0)][bitrate_index],
            RATES[rate_index] / 4,
        ),
    };
    let bits = kbps * 1000;
    Ok(Some(match (layer_row, version) {
        (0, _) => (12 * bits / rate + padding) * 4,
        (2, 0 | 2) => 72 * bits / rate + padding,
        _ => 144 * bits / rate + padding,
    }))
}

/// Walks the MPEG audio frames from `start` to `end` ([`walk_frames`]): symphonia's
/// reader resynchronises past a damaged frame, dropping it, with no word. A free-format
/// stream, whose headers hold no length, is not walked.
pub(crate) fn mpeg_frames<R: Read + Seek>(
    r: &mut R,
    start: u64,
    end: u64,
) -> std::io::Result<Result<(), String>> {
    walk_frames(r, start, end, "MP3", 4, |h, short| {
        match mpeg_frame_len(h) {
            Ok(Some(len)) => Frame::Len(len),
            Ok(None) => Frame::Unmeasured,
            Err(()) if short => Frame::Cut,
            Err(()) => Frame::NotAHeader,
        }
    })
}

/// The byte where the first frame of the native FLAC stream at `start` begins: past
/// `fLaC` and the metadata blocks. `None` when the blocks run past `end`.
pub(crate) fn flac_frames_start<R: Read + Seek>(
    r: &mut R,
    start: u64,
    end: u64,
) -> std::io::Result<Option<u64>> {
    let mut pos = start + 4;
    loop {
        let h = read_at(r, pos, 4)?;
        if h.len() < 4 {
            return Ok(None);
        }
        pos += 4 + u32::from_be_bytes([0, h[1], h[2], h[3]]) as u64;
        if pos > end {
            return Ok(None);
        }
        if h[0] & 0x80 != 0 {
            return Ok(Some(pos));
        }
    }
}

/// A source seen only up to `end` (a trailing tag is not part of the stream), with
/// `patch`'s 8 bytes read in place of those at its offset (a streamed CAF's data size of
/// -1 read as the size it has).
pub(crate) struct Bounded<'s> {
    inner: Box<dyn symphonia::core::io::MediaSource + 's>,
    end: u64,
    pos: u64,
    patch: Option<(u64, [u8; 8])>,
}

impl<'s> Bounded<'s> {
    pub(crate) fn new(
        mut inner: Box<dyn symphonia::core::io::MediaSource + 's>,
        end: u64,
        patch: Option<(u64, [u8; 8])>,
    ) -> std::io::Result<Self> {
        let pos = inner.stream_position()?;
        Ok(Bounded {
            inner,
            end,
            pos,
            patch,
        })
    }
}

impl Read for Bounded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.end.saturating_sub(self.pos);
        let n = (buf.len() as u64).min(left) as usize;
        if n == 0 {
            return Ok(0);
        }
        let got = self.inner.read(&mut buf[..n])?;
        if let Some((at, bytes)) = self.patch {
            for (i, b) in buf[..got].iter_mut().enumerate() {
                let p = self.pos + i as u64;
                if (at..at + 8).contains(&p) {
                    *b = bytes[(p - at) as usize];
                }
            }
        }
        self.pos += got as u64;
        Ok(got)
    }
}

impl Seek for Bounded<'_> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let to = match to {
            SeekFrom::End(d) => {
                SeekFrom::Start(self.end.checked_add_signed(d).ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, "invalid seek")
                })?)
            }
            other => other,
        };
        self.pos = self.inner.seek(to)?;
        Ok(self.pos)
    }
}

impl symphonia::core::io::MediaSource for Bounded<'_> {
    fn is_seekable(&self) -> bool {
        true
    }

    fn byte_len(&self) -> Option<u64> {
        Some(self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ogg_crc_is_the_reference_one() {
        // CRC-32/MPEG-2 without its final inversion and initial 0xffffffff: the Ogg CRC of
        // "123456789" is 0x89a1897f.
        assert_eq!(ogg_crc(b"123456789"), 0x89a1_897f);
    }
}
