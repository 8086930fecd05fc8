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
/// whole, pass its CRC and follow the previous page of its stream in sequence, and no
/// stream may begin after the first group of beginning-of-stream pages (a chained Ogg
/// file, `cat a.ogg b.ogg`: symphonia's reader then asks for a decoder reset; libsndfile
/// reads only the first link and ffmpeg reads on, so the two disagree: refused by name).
/// `Err` is the one-line reason.
///
/// A stream whose last page lacks the end-of-stream flag is read to its last page, as
/// libsndfile and ffmpeg read it: some writers leave the flag out of complete files. Ogg
/// Vorbis states no length, so such a file cannot be told from one cut exactly at a page
/// boundary; a cut inside a page is refused here, and Ogg FLAC with a STREAMINFO total is
/// held to it ([`ogg_flac_total`]).
pub(crate) fn ogg_pages<R: Read + Seek>(
    r: &mut R,
    start: u64,
    len: u64,
) -> std::io::Result<Result<Vec<Patch>, String>> {
    let mut pos = start;
    let mut page = 0u64;
    // (serial, last sequence number, ended, where its last page starts)
    let mut streams: Vec<(u32, u32, bool, u64)> = Vec::new();
    // Whether a page that begins no stream has been seen (the beginning-of-stream pages of
    // a file's streams come first, grouped).
    let mut past_bos = false;
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
                s.3 = pos;
            }
            None if past_bos && flags & 2 != 0 => {
                return Ok(Err(format!(
                    "unsupported: a chained Ogg stream (a second logical stream begins at byte {pos}, after the first; melctl decodes Ogg files of one stream)"
                )));
            }
            None if past_bos => {
                return Ok(Err(format!(
                    "corrupt audio data: Ogg page {page} (byte {pos}) belongs to a stream that never began"
                )));
            }
            None => streams.push((serial, seq, flags & 4 != 0, pos)),
        }
        past_bos |= flags & 2 == 0;
        pos += size;
        page += 1;
    }
    // A stream's last page without the flag: read with it set (and its CRC to match), so
    // that symphonia's reader ends the stream there as at any last page, the last
    // granule position trimming the last packet as libsndfile trims it (without the flag
    // it met the end of the file as a cut, and kept the padding).
    let mut patches = Vec::new();
    for &(_, _, ended, at) in &streams {
        if ended {
            continue;
        }
        let head = read_at(r, at, 27)?;
        let size = 27 + head[26] as u64;
        let body: u64 = read_at(r, at + 27, head[26] as usize)?
            .iter()
            .map(|&s| s as u64)
            .sum();
        buf.clear();
        r.seek(SeekFrom::Start(at))?;
        r.by_ref().take(size + body).read_to_end(&mut buf)?;
        buf[5] |= 4;
        buf[22..26].fill(0);
        let crc = ogg_crc(&buf);
        patches.push((at + 5, vec![buf[5]]));
        patches.push((at + 22, crc.to_le_bytes().to_vec()));
    }
    Ok(Ok(patches))
}

/// Bytes read in place of a source's: (offset, bytes).
pub(crate) type Patch = (u64, Vec<u8>);

/// Walks the top-level boxes of an MP4 file from `start` to `len`: the media boxes (`mdat`,
/// `moov`, `moof`) must end within the file. symphonia's reader meets a cut `mdat` as an
/// error of its own ("no atom pending read"), the sample table (a timeline, not a promise:
/// [`crate::symphonia_read`]) says nothing of the bytes; the box sizes do. Bytes after the
/// last whole box that make no media box (padding, a few stray bytes) are left to the
/// reader, as before. `Err` is the one-line reason.
pub(crate) fn mp4_boxes<R: Read + Seek>(
    r: &mut R,
    start: u64,
    len: u64,
) -> std::io::Result<Result<(), String>> {
    let mut pos = start;
    while pos < len {
        let h = read_at(r, pos, 16)?;
        // Named from a list, never quoted from the file.
        let Some(name) = ["mdat", "moov", "moof"]
            .into_iter()
            .find(|n| h.get(4..8) == Some(n.as_bytes()))
        else {
            // Another box, whole or not, is the reader's to judge; only whole boxes are
            // walked past.
            let size = h
                .get(..4)
                .map(|b| u32::from_be_bytes(b.try_into().unwrap()));
            match size.map(u64::from).filter(|&s| s >= 8 && pos + s <= len) {
                Some(s) => {
                    pos += s;
                    continue;
                }
                None => return Ok(Ok(())),
            }
        };
        let size = match u32::from_be_bytes(h[0..4].try_into().unwrap()) {
            // To the end of the file.
            0 => return Ok(Ok(())),
            1 if h.len() < 16 => {
                return Ok(Err(format!(
                    "truncated: the file ends inside the header of its MP4 {name} box (byte {pos})"
                )));
            }
            1 => u64::from_be_bytes(h[8..16].try_into().unwrap()),
            s => s as u64,
        };
        match pos.checked_add(size) {
            Some(end) if end <= len && size >= 8 => pos = end,
            _ if size < 8 => {
                return Ok(Err(format!(
                    "corrupt audio data: the MP4 {name} box at byte {pos} says it is {size} bytes long"
                )));
            }
            _ => {
                return Ok(Err(format!(
                    "truncated: the file ends inside its MP4 {name} box (bytes {pos} to {}, the file has {len})",
                    pos.saturating_add(size)
                )));
            }
        }
    }
    Ok(Ok(()))
}

/// Matroska: the EBML header and the Segment after it must end within the file (a Segment
/// of unknown size, as a live writer leaves it, runs to the end). symphonia's reader says a
/// cut file has "no segment element" or meets its end as an error of its own. `Err` is the
/// one-line reason.
pub(crate) fn mkv_segment<R: Read + Seek>(
    r: &mut R,
    start: u64,
    len: u64,
) -> std::io::Result<Result<(), String>> {
    let mut pos = start;
    for what in ["EBML header", "Segment"] {
        let h = read_at(r, pos, 12)?;
        let parsed = crate::trim::vint(&h, true).and_then(|(_, il)| {
            h.get(il..)
                .and_then(|b| crate::trim::vint(b, false))
                .map(|(size, sl)| (size, sl, il + sl))
        });
        let Some((size, sl, head)) = parsed else {
            return Ok(Err(format!(
                "truncated: the file ends inside its Matroska {what}'s header (byte {pos})"
            )));
        };
        if size == (1u64 << (7 * sl)) - 1 {
            // Unknown size: to the end of the file.
            return Ok(Ok(()));
        }
        let end = pos.saturating_add(head as u64).saturating_add(size);
        if end > len {
            return Ok(Err(format!(
                "truncated: the file ends inside its Matroska {what} (bytes {pos} to {end}, the file has {len})"
            )));
        }
        pos = end;
    }
    Ok(Ok(()))
}

/// Ogg FLAC: the total frame count its STREAMINFO states (in the first page's first
/// packet), when it states one (ffmpeg writes 0, "unknown", there).
pub(crate) fn ogg_flac_total<R: Read + Seek>(
    r: &mut R,
    start: u64,
) -> std::io::Result<Option<u64>> {
    let head = read_at(r, start, 27)?;
    let Some(&segments) = head.get(26) else {
        return Ok(None);
    };
    // 0x7f "FLAC", version (2), header count (2), "fLaC", block header (4), STREAMINFO (34).
    let p = read_at(r, start + 27 + segments as u64, 51)?;
    if p.len() < 51 || &p[..5] != b"\x7fFLAC" || &p[9..13] != b"fLaC" || p[13] & 0x7f != 0 {
        return Ok(None);
    }
    let si = &p[17..51];
    let total =
        ((si[13] as u64 & 0xf) << 32) | u32::from_be_bytes(si[14..18].try_into().unwrap()) as u64;
    Ok((total > 0).then_some(total))
}

/// Native FLAC: what STREAMINFO (at `start + 4`) says against the header of the first
/// frame (at `first`), where the frame states the value itself: sample rate, bits per
/// sample, channels. symphonia's reader skips every frame that disagrees with STREAMINFO
/// and then finds none (a complete file was called "truncated"); libsndfile takes
/// STREAMINFO's rate, ffmpeg the frames'. Which is right is a guess: refused by name.
pub(crate) fn flac_header_check<R: Read + Seek>(
    r: &mut R,
    start: u64,
    first: u64,
) -> std::io::Result<Result<(), String>> {
    let block = read_at(r, start + 4, 38)?;
    let h = read_at(r, first, 16)?;
    if block.len() < 38 || block[0] & 0x7f != 0 {
        // No STREAMINFO first: the reader says what is wrong.
        return Ok(Ok(()));
    }
    let si = &block[4..];
    if h.len() < 5 || h[0] != 0xff || h[1] & 0xfe != 0xf8 {
        // No frame there: the reader and the frame checks say what is wrong.
        return Ok(Ok(()));
    }
    let si_rate = u32::from_be_bytes([0, si[10], si[11], si[12]]) >> 4;
    let si_channels = ((si[12] >> 1) & 7) as u32 + 1;
    let si_bits = (((si[12] & 1) << 4) | (si[13] >> 4)) as u32 + 1;
    // After the 4 fixed bytes: the frame or sample number (UTF-8-like, 1 to 7 bytes), then
    // the block size's and the rate's extra bytes.
    let number = match h[4].leading_ones() {
        0 => 1,
        n @ 2..=7 => n as usize,
        _ => return Ok(Ok(())),
    };
    let mut at = 4 + number;
    at += match h[2] >> 4 {
        6 => 1,
        7 => 2,
        _ => 0,
    };
    let byte = |i: usize| h.get(i).copied().map(u32::from);
    let rate = match h[2] & 0xf {
        c @ 1..=11 => Some(
            [
                88200, 176400, 192000, 8000, 16000, 22050, 24000, 32000, 44100, 48000, 96000,
            ][c as usize - 1],
        ),
        12 => byte(at).map(|k| k * 1000),
        13 => byte(at).zip(byte(at + 1)).map(|(a, b)| (a << 8) | b),
        14 => byte(at).zip(byte(at + 1)).map(|(a, b)| ((a << 8) | b) * 10),
        _ => None,
    };
    let bits = match (h[3] >> 1) & 7 {
        1 => Some(8),
        2 => Some(12),
        4 => Some(16),
        5 => Some(20),
        6 => Some(24),
        7 => Some(32),
        _ => None,
    };
    let channels = match h[3] >> 4 {
        c @ 0..=7 => Some(c as u32 + 1),
        8..=10 => Some(2),
        _ => None,
    };
    if let Some(f) = rate.filter(|&f| f != si_rate) {
        return Ok(Err(format!(
            "inconsistent header: STREAMINFO says a sample rate of {si_rate} Hz, the first frame's header {f} Hz (libsndfile takes the first, ffmpeg the second)"
        )));
    }
    if let Some(f) = bits.filter(|&f| f != si_bits) {
        return Ok(Err(format!(
            "inconsistent header: STREAMINFO says {si_bits}-bit samples, the first frame's header {f}-bit"
        )));
    }
    if let Some(f) = channels.filter(|&f| f != si_channels) {
        return Ok(Err(format!(
            "inconsistent header: STREAMINFO says {si_channels} channel(s), the first frame's header {f}"
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
/// left) where the last one said it ends, and the last must end at `end`, or where
/// nothing but tags follows ([`only_tags`]). Returns where the frames end; `Err` is the
/// one-line reason.
fn walk_frames<R: Read + Seek>(
    r: &mut R,
    start: u64,
    end: u64,
    name: &str,
    header: usize,
    measure: impl Fn(&[u8], bool) -> Frame,
) -> std::io::Result<Result<u64, String>> {
    let mut pos = start;
    let mut frame = 0u64;
    while pos < end {
        let h = read_at(r, pos, header)?;
        let short = h.len() < header || pos + header as u64 > end;
        let len = match measure(&h, short) {
            Frame::Len(len) => len,
            Frame::Unmeasured => return Ok(Ok(end)),
            Frame::NotAHeader | Frame::Cut if frame > 0 && only_tags(r, pos, end)? => {
                return Ok(Ok(pos));
            }
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
    Ok(Ok(end))
}

/// Whether the bytes from `pos` to `end` are tags and nothing else, read forwards from their
/// headers: ID3v1 (`TAG`, 128 bytes), APEv2 (an `APETAGEX` header, its size and footer),
/// Lyrics3 v2 (`LYRICSBEGIN` ... a 6-digit size, `LYRICS200`) and ID3v2 (appended, as some
/// taggers write it). [`audio_end`] finds the usual tags from the end; this finds the
/// rest (a tag whose footer is missing or says another size) where the last frame ends.
/// A second stream's ID3v2 tag (files joined with `cat`) is followed by frames, not tags.
fn only_tags<R: Read + Seek>(r: &mut R, mut pos: u64, end: u64) -> std::io::Result<bool> {
    for _ in 0..8 {
        if pos == end {
            return Ok(true);
        }
        let h = read_at(r, pos, 32)?;
        let at = |m: &[u8]| h.starts_with(m);
        let size = if at(b"TAG") && end - pos == 128 {
            128
        } else if at(b"APETAGEX") && h.len() == 32 {
            // The header's size counts the items and the footer.
            32 + u32::from_le_bytes(h[12..16].try_into().unwrap()) as u64
        } else if at(b"ID3") && h.len() >= 10 {
            let body = h[6..10]
                .iter()
                .fold(0u64, |acc, &b| (acc << 7) | (b & 0x7f) as u64);
            10 + body + if h[5] & 0x10 != 0 { 10 } else { 0 }
        } else if at(b"LYRICSBEGIN") {
            // Lyrics3 v2 ends with its size (6 digits) and `LYRICS200`, before an ID3v1 tag
            // (here, or already cut off the range by `audio_end`).
            let mut size = None;
            for tail in [end, end.saturating_sub(128)] {
                let foot = read_at(r, tail.saturating_sub(15), 15)?;
                let n = std::str::from_utf8(&foot)
                    .ok()
                    .filter(|f| f.len() == 15 && f.ends_with("LYRICS200"))
                    .and_then(|f| f[..6].parse::<u64>().ok());
                if n.is_some_and(|n| tail.saturating_sub(15) == pos + n) {
                    size = n.map(|n| n + 15);
                    break;
                }
            }
            match size {
                Some(n) => n,
                None => return Ok(false),
            }
        } else {
            return Ok(false);
        };
        if size > end - pos {
            return Ok(false);
        }
        pos += size;
    }
    Ok(pos == end)
}

/// Walks the ADTS frames from `start` to `end` ([`walk_frames`]): where they end.
pub(crate) fn adts_frames<R: Read + Seek>(
    r: &mut R,
    start: u64,
    end: u64,
) -> std::io::Result<Result<u64, String>> {
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
/// stream, whose headers hold no length, is not walked. Returns where the frames end.
pub(crate) fn mpeg_frames<R: Read + Seek>(
    r: &mut R,
    start: u64,
    end: u64,
) -> std::io::Result<Result<u64, String>> {
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
/// `patches` read in place of the bytes at their offsets (a streamed CAF's data size of -1
/// read as the size it has; an Ogg stream's last page read with its end-of-stream flag).
pub(crate) struct Bounded<'s> {
    inner: Box<dyn symphonia::core::io::MediaSource + 's>,
    end: u64,
    pos: u64,
    patches: Vec<Patch>,
}

impl<'s> Bounded<'s> {
    pub(crate) fn new(
        mut inner: Box<dyn symphonia::core::io::MediaSource + 's>,
        end: u64,
        patches: Vec<Patch>,
    ) -> std::io::Result<Self> {
        let pos = inner.stream_position()?;
        Ok(Bounded {
            inner,
            end,
            pos,
            patches,
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
        for (at, bytes) in &self.patches {
            let (lo, hi) = (self.pos, self.pos + got as u64);
            let (from, to) = ((*at).max(lo), (at + bytes.len() as u64).min(hi));
            for p in from..to {
                buf[(p - lo) as usize] = bytes[(p - at) as usize];
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
