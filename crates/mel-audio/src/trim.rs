//! Encoder priming and padding that a container says to drop (issue 22): lossy encoders
//! put silence-ish frames before the audio (AAC's 1024, LAME's 576 + the decoder's 529) and
//! pad the last packet, and the container says how many frames to drop. symphonia 0.6
//! parses MP4 edit lists and Matroska's CodecDelay but applies neither, so a clip came out
//! shifted and longer than its source (17408 frames of AAC in M4A for 16000). ffmpeg, which
//! torchaudio-based pipelines decode with, applies them; melctl decodes what ffmpeg 9.0
//! decodes (`fixtures/corpus`; ffmpeg 5.1 kept AAC's end padding in MP4 and ignored
//! CodecDelay for AAC):
//!
//! - **MP4**: the audio track's edit list (`moov/trak/edts/elst`): one edit, `media_time`
//!   frames skipped (media timescale, `mdhd`), `segment_duration` frames kept (movie
//!   timescale, `mvhd`; 0 keeps the rest). An empty edit (a delay), several edits or a rate
//!   other than 1 are refused by name. Without an edit list the track ends where its
//!   sample table says (the last packet's duration), and an iTunes `iTunSMPB` tag's
//!   priming and remainder are dropped, as ffmpeg does; with an edit list the tag is
//!   ignored, as ffmpeg does.
//! - **Matroska**: the track's `CodecDelay` (ns) frames skipped at the start, and a
//!   positive `DiscardPadding` (ns) on the track's last block dropped at the end. A
//!   `DiscardPadding` anywhere else, or a negative one, is refused by name; one of 0 drops
//!   nothing and is accepted anywhere (ffmpeg 5.1 writes one on MP3's first block). For Vorbis the
//!   `CodecDelay` ffmpeg writes is the first packet (checked at 8, 16, 22.05 and 44.1 kHz),
//!   which a Vorbis decoder that follows the specification (symphonia's, libvorbis) already
//!   gives no audio for; it is not skipped twice. `SeekPreRoll` concerns seeking only: decoding starts at the first block.
//!
//! - **ADTS** states no priming or padding: every frame is kept, the encoder's priming
//!   included, as ffmpeg 5.1 and 9.0 both decode ffmpeg-made ADTS. A decoder that drops
//!   1,024 frames there guesses the encoder (a report saw ffmpeg 5.1 do so on its files,
//!   not reproduced on ffmpeg-made ones): melctl drops what a file states and nothing else,
//!   so the count does not depend on which ffmpeg is installed (docs/inputs.md).
//!
//! Reading is bounded by the file: a fixed number of bytes per box or element header, and
//! every step moves forward, so a hostile file costs at most one small read per 2 bytes.

use std::io::{Read, Seek};

use crate::sniff::{Container, read_at};

/// What to drop from a track's decoded frames, in frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Trim {
    /// Frames dropped at the start.
    pub skip: u64,
    /// Where the kept frames end.
    pub end: End,
}

/// Where a trimmed track ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum End {
    /// At the last decoded frame.
    #[default]
    All,
    /// After this many frames (past the skipped ones).
    Keep(u64),
    /// This many frames before the last decoded one.
    Drop(u64),
}

impl Trim {
    /// The frames kept of `decoded` decoded frames.
    pub fn kept(&self, decoded: u64) -> u64 {
        match self.end {
            End::Drop(d) => self.before_drop(decoded).saturating_sub(d),
            _ => self.before_drop(decoded),
        }
    }

    /// The frames kept of `decoded`, before an end known only at the end (`Drop`) is
    /// applied: what decoding holds while it runs.
    pub fn before_drop(&self, decoded: u64) -> u64 {
        let after = decoded.saturating_sub(self.skip);
        match self.end {
            End::Keep(k) => after.min(k),
            _ => after,
        }
    }

    /// Of `n` frames decoded from frame `at` of the stream, the range kept (before `Drop`).
    pub fn window(&self, at: u64, n: usize) -> std::ops::Range<usize> {
        let lo = self.skip.saturating_sub(at).min(n as u64) as usize;
        let hi = match self.end {
            End::Keep(k) => (self.skip.saturating_add(k).saturating_sub(at)).min(n as u64) as usize,
            _ => n,
        };
        lo..hi.max(lo)
    }
}

/// The trimming a container states, per track, before the sample rate is known.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Stated {
    /// Nothing to trim (or a container without trimming information).
    #[default]
    None,
    /// MP4: the movie timescale, each track's edit list, and an iTunSMPB tag.
    Mp4 {
        movie_timescale: u32,
        tracks: Vec<Mp4Track>,
        itunsmpb: Option<(u64, u64)>,
    },
    /// Matroska: each track's codec delay and end padding.
    Mkv(Vec<MkvTrack>),
}

/// One MP4 track's timing.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Mp4Track {
    id: u32,
    media_timescale: u32,
    /// The edit list: `(segment_duration, media_time, rate)` of its first entries, and
    /// how many it has.
    edits: Vec<(u64, i64, i32)>,
    edit_count: u64,
}

/// One Matroska track's trimming.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct MkvTrack {
    number: u64,
    codec_delay_ns: u64,
    vorbis: bool,
    blocks: u64,
    /// The first non-zero DiscardPadding of the track: (its block's index, nanoseconds).
    discard: Option<(u64, i64)>,
}

/// Reads what `container` (at `base` of a source `len` bytes long) states about trimming.
pub(crate) fn read<R: Read + Seek>(
    r: &mut R,
    container: Container,
    base: u64,
    len: u64,
) -> std::io::Result<Stated> {
    match container {
        Container::Mp4 => mp4(r, base, len),
        Container::Mkv => mkv(r, base, len),
        _ => Ok(Stated::None),
    }
}

/// `amount` units of `per_second` a second, in frames at `rate`, rounded to the nearest
/// (as ffmpeg rescales).
fn frames(amount: u64, per_second: u64, rate: u32) -> u64 {
    if per_second == 0 {
        return 0;
    }
    let v = (amount as u128 * rate as u128 + per_second as u128 / 2) / per_second as u128;
    u64::try_from(v).unwrap_or(u64::MAX)
}

impl Stated {
    /// The trim for track `track` decoded at `rate` Hz whose sample table says it lasts
    /// `media` (frames, in the track's time base of `media_per_second`), or why it cannot
    /// be honoured.
    pub fn trim(
        &self,
        track: u32,
        rate: Option<u32>,
        media: Option<(u64, u64)>,
    ) -> std::result::Result<Trim, String> {
        let need_rate = || {
            rate.filter(|&r| r > 0)
                .ok_or_else(|| "unsupported: the container states frames to trim, but the track has no sample rate".to_string())
        };
        match self {
            Stated::None => Ok(Trim::default()),
            Stated::Mp4 {
                movie_timescale,
                tracks,
                itunsmpb,
            } => {
                let Some(t) = tracks.iter().find(|t| t.id == track) else {
                    return Ok(Trim::default());
                };
                if t.edit_count == 0 {
                    // No edit list: the track ends where its sample table says (ffmpeg
                    // trims the last packet to its duration), less an iTunSMPB tag's
                    // priming and remainder.
                    let rate = need_rate()?;
                    let end = media.map(|(d, per)| frames(d, per, rate));
                    let (priming, remainder) = itunsmpb.unwrap_or((0, 0));
                    let priming = if (1..16384).contains(&priming) {
                        priming
                    } else {
                        0
                    };
                    return Ok(Trim {
                        skip: priming,
                        end: match end {
                            Some(e) => {
                                End::Keep(e.saturating_sub(priming).saturating_sub(remainder))
                            }
                            None if remainder > 0 => End::Drop(remainder),
                            None => End::All,
                        },
                    });
                }
                if t.edit_count > 1 {
                    let empty = t.edits.iter().any(|e| e.1 == -1);
                    return Err(format!(
                        "unsupported: an MP4 edit list of {} edits{} (melctl applies one edit: frames skipped and kept)",
                        t.edit_count,
                        if empty {
                            " with a delay (an empty edit)"
                        } else {
                            ""
                        }
                    ));
                }
                let (duration, media_time, media_rate) = t.edits[0];
                if media_time == -1 {
                    return Err("unsupported: an MP4 edit list that is one empty edit (no audio is presented)".into());
                }
                if media_time < 0 {
                    return Err(format!(
                        "inconsistent header: an MP4 edit starts at media time {media_time}"
                    ));
                }
                if media_rate != 0x1_0000 {
                    return Err(format!(
                        "unsupported: an MP4 edit played at rate {} (melctl applies rate 1)",
                        media_rate as f64 / 65536.0
                    ));
                }
                if t.media_timescale == 0 || *movie_timescale == 0 {
                    return Err(
                        "inconsistent header: an MP4 edit list with a timescale of 0".into(),
                    );
                }
                let rate = need_rate()?;
                Ok(Trim {
                    skip: frames(media_time as u64, t.media_timescale as u64, rate),
                    end: if duration == 0 {
                        End::All
                    } else {
                        End::Keep(frames(duration, *movie_timescale as u64, rate))
                    },
                })
            }
            Stated::Mkv(tracks) => {
                let Some(t) = tracks.iter().find(|t| t.number == track as u64) else {
                    return Ok(Trim::default());
                };
                let mut trim = Trim::default();
                if t.codec_delay_ns > 0 && !t.vorbis {
                    trim.skip = frames(t.codec_delay_ns, 1_000_000_000, need_rate()?);
                }
                if let Some((block, ns)) = t.discard {
                    if block + 1 != t.blocks {
                        return Err(format!(
                            "unsupported: a Matroska DiscardPadding on block {} of {} of the audio track (melctl applies it on the last block)",
                            block + 1,
                            t.blocks
                        ));
                    }
                    if ns < 0 {
                        return Err("unsupported: a negative Matroska DiscardPadding".into());
                    }
                    trim.end = End::Drop(frames(ns as u64, 1_000_000_000, need_rate()?));
                }
                Ok(trim)
            }
        }
    }
}

/// An MP4 box: (type, body start, body end). `None` past the end or at a malformed header.
fn mp4_box<R: Read + Seek>(
    r: &mut R,
    pos: u64,
    end: u64,
) -> std::io::Result<Option<([u8; 4], u64, u64)>> {
    if pos.saturating_add(8) > end {
        return Ok(None);
    }
    let h = read_at(r, pos, 16)?;
    if h.len() < 8 {
        return Ok(None);
    }
    let size = u32::from_be_bytes(h[0..4].try_into().unwrap()) as u64;
    let typ: [u8; 4] = h[4..8].try_into().unwrap();
    let (size, header) = match size {
        0 => (end - pos, 8),
        1 if h.len() == 16 => (u64::from_be_bytes(h[8..16].try_into().unwrap()), 16),
        1 => return Ok(None),
        s => (s, 8),
    };
    if size < header || size > end - pos {
        return Ok(None);
    }
    Ok(Some((typ, pos + header, pos + size)))
}

/// Calls `f` on each box in `[start, end)` (until it returns false or a box is malformed).
fn mp4_each<R: Read + Seek>(
    r: &mut R,
    start: u64,
    end: u64,
    mut f: impl FnMut(&mut R, [u8; 4], u64, u64) -> std::io::Result<bool>,
) -> std::io::Result<()> {
    let mut pos = start;
    while let Some((typ, body, next)) = mp4_box(r, pos, end)? {
        if !f(r, typ, body, next)? {
            break;
        }
        pos = next;
    }
    Ok(())
}

/// A full box's version and the body after its version and flags.
fn full<R: Read + Seek>(
    r: &mut R,
    body: u64,
    next: u64,
    n: usize,
) -> std::io::Result<(u8, Vec<u8>)> {
    let want = (next - body).min(4 + n as u64) as usize;
    let b = read_at(r, body, want)?;
    Ok((
        b.first().copied().unwrap_or(0),
        b.get(4..).unwrap_or(&[]).to_vec(),
    ))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|x| u32::from_be_bytes(x.try_into().unwrap()))
}

fn be64(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8)
        .map(|x| u64::from_be_bytes(x.try_into().unwrap()))
}

/// The timescale of an `mvhd` or `mdhd` body (after version and flags).
fn timescale(version: u8, b: &[u8]) -> u32 {
    be32(b, if version == 1 { 16 } else { 8 }).unwrap_or(0)
}

fn mp4<R: Read + Seek>(r: &mut R, base: u64, len: u64) -> std::io::Result<Stated> {
    let mut movie_timescale = 0;
    let mut tracks = Vec::new();
    let mut itunsmpb = None;
    mp4_each(r, base, len, |r, typ, body, next| {
        if &typ != b"moov" {
            return Ok(true);
        }
        mp4_each(r, body, next, |r, typ, body, next| {
            match &typ {
                b"mvhd" => {
                    let (v, b) = full(r, body, next, 20)?;
                    movie_timescale = timescale(v, &b);
                }
                b"trak" => tracks.push(mp4_trak(r, body, next)?),
                b"udta" => itunsmpb = itunsmpb.or(mp4_itunsmpb(r, body, next)?),
                _ => {}
            }
            Ok(true)
        })?;
        Ok(false)
    })?;
    Ok(Stated::Mp4 {
        movie_timescale,
        tracks,
        itunsmpb,
    })
}

fn mp4_trak<R: Read + Seek>(r: &mut R, body: u64, next: u64) -> std::io::Result<Mp4Track> {
    let mut t = Mp4Track::default();
    mp4_each(r, body, next, |r, typ, body, next| {
        match &typ {
            b"tkhd" => {
                let (v, b) = full(r, body, next, 20)?;
                t.id = be32(&b, if v == 1 { 16 } else { 8 }).unwrap_or(0);
            }
            b"edts" => mp4_each(r, body, next, |r, typ, body, next| {
                if &typ == b"elst" {
                    // The entry count and the first two entries: more are refused.
                    let (v, b) = full(r, body, next, 4 + 2 * 20)?;
                    let size = if v == 1 { 20 } else { 12 };
                    let room = (next - body).saturating_sub(8) / size as u64;
                    t.edit_count = (be32(&b, 0).unwrap_or(0) as u64).min(room);
                    for i in 0..t.edit_count.min(2) as usize {
                        let at = 4 + i * size;
                        let entry = if v == 1 {
                            be64(&b, at)
                                .zip(be64(&b, at + 8))
                                .map(|(d, m)| (d, m as i64))
                        } else {
                            be32(&b, at)
                                .zip(be32(&b, at + 4))
                                .map(|(d, m)| (d as u64, m as i32 as i64))
                        };
                        let rate = be32(&b, at + size - 4).map(|x| x as i32);
                        if let (Some((d, m)), Some(rate)) = (entry, rate) {
                            t.edits.push((d, m, rate));
                        }
                    }
                    t.edit_count = t.edit_count.max(t.edits.len() as u64);
                    if t.edits.is_empty() {
                        t.edit_count = 0;
                    }
                }
                Ok(true)
            })?,
            b"mdia" => mp4_each(r, body, next, |r, typ, body, next| {
                if &typ == b"mdhd" {
                    let (v, b) = full(r, body, next, 20)?;
                    t.media_timescale = timescale(v, &b);
                }
                Ok(true)
            })?,
            _ => {}
        }
        Ok(true)
    })?;
    Ok(t)
}

/// `udta/meta/ilst/----` named `iTunSMPB`: (priming, remainder), as ffmpeg reads it
/// (`%*X %X %X %X`).
fn mp4_itunsmpb<R: Read + Seek>(
    r: &mut R,
    body: u64,
    next: u64,
) -> std::io::Result<Option<(u64, u64)>> {
    let mut found = None;
    mp4_each(r, body, next, |r, typ, body, next| {
        if &typ != b"meta" {
            return Ok(true);
        }
        // ISO `meta` is a full box; QuickTime's is not.
        let head = read_at(r, body, 8)?;
        let start = if head.get(4..8).is_some_and(|t| t == b"hdlr") {
            body
        } else {
            body + 4
        };
        mp4_each(r, start, next, |r, typ, body, next| {
            if &typ != b"ilst" {
                return Ok(true);
            }
            mp4_each(r, body, next, |r, typ, body, next| {
                if &typ != b"----" {
                    return Ok(true);
                }
                let (mut name, mut data) = (Vec::new(), Vec::new());
                mp4_each(r, body, next, |r, typ, body, next| {
                    let n = (next - body).min(256) as usize;
                    match &typ {
                        b"name" => name = read_at(r, body, n)?.get(4..).unwrap_or(&[]).to_vec(),
                        b"data" => data = read_at(r, body, n)?.get(8..).unwrap_or(&[]).to_vec(),
                        _ => {}
                    }
                    Ok(true)
                })?;
                if name == b"iTunSMPB" {
                    let text = String::from_utf8_lossy(&data);
                    let f: Vec<Option<u64>> = text
                        .split_whitespace()
                        .map(|w| u64::from_str_radix(w, 16).ok())
                        .collect();
                    if let (Some(Some(p)), Some(Some(rem))) = (f.get(1), f.get(2)) {
                        found = Some((*p, *rem));
                    }
                }
                Ok(found.is_none())
            })?;
            Ok(found.is_none())
        })?;
        Ok(found.is_none())
    })?;
    Ok(found)
}

/// An EBML variable-length integer at the start of `b`: (value, length); the marker bit is
/// kept for IDs. `None` if malformed.
pub(crate) fn vint(b: &[u8], keep_marker: bool) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let n = first.leading_zeros() as usize + 1;
    if n > 8 || b.len() < n {
        return None;
    }
    let mut v = if keep_marker {
        first as u64
    } else {
        (first as u64) & (0xff >> n)
    };
    for &x in &b[1..n] {
        v = (v << 8) | x as u64;
    }
    Some((v, n))
}

/// An EBML element at `pos`: (id, body start, body end or `None` for an unknown size).
fn ebml<R: Read + Seek>(
    r: &mut R,
    pos: u64,
    end: u64,
) -> std::io::Result<Option<(u64, u64, Option<u64>)>> {
    let h = read_at(r, pos, 12)?;
    let Some((id, il)) = vint(&h, true) else {
        return Ok(None);
    };
    let Some((size, sl)) = h.get(il..).and_then(|b| vint(b, false)) else {
        return Ok(None);
    };
    let body = pos + (il + sl) as u64;
    if body > end {
        return Ok(None);
    }
    let unknown = size == (1u64 << (7 * sl)) - 1;
    if unknown {
        return Ok(Some((id, body, None)));
    }
    Ok(body
        .checked_add(size)
        .filter(|&e| e <= end)
        .map(|e| (id, body, Some(e))))
}

fn uint(b: &[u8]) -> u64 {
    b.iter().take(8).fold(0, |a, &x| (a << 8) | x as u64)
}

const SEGMENT: u64 = 0x1853_8067;
const TRACKS: u64 = 0x1654_AE6B;
const TRACK_ENTRY: u64 = 0xAE;
const CLUSTER: u64 = 0x1F43_B675;
/// The Segment's children: an unknown-size Cluster ends where one of them starts.
const TOP: [u64; 8] = [
    CLUSTER,
    0x1C53_BB6B,
    0x1254_C367,
    0x1043_A770,
    0x1941_A469,
    0x114D_9B74,
    0x1549_A966,
    TRACKS,
];

fn mkv<R: Read + Seek>(r: &mut R, base: u64, len: u64) -> std::io::Result<Stated> {
    let mut tracks: Vec<MkvTrack> = Vec::new();
    let mut pos = base;
    // The EBML header, then the Segment.
    let mut seg = None;
    while let Some((id, body, end)) = ebml(r, pos, len)? {
        if id == SEGMENT {
            seg = Some((body, end.unwrap_or(len)));
            break;
        }
        match end {
            Some(e) => pos = e,
            None => break,
        }
    }
    let Some((mut pos, seg_end)) = seg else {
        return Ok(Stated::None);
    };
    while let Some((id, body, end)) = ebml(r, pos, seg_end)? {
        match id {
            TRACKS => {
                let Some(end) = end else { break };
                mkv_tracks(r, body, end, &mut tracks)?;
                pos = end;
            }
            CLUSTER => {
                pos = mkv_cluster(r, body, end.unwrap_or(seg_end), end.is_none(), &mut tracks)?
            }
            _ => match end {
                Some(e) => pos = e,
                None => break,
            },
        }
        if pos >= seg_end {
            break;
        }
    }
    Ok(Stated::Mkv(tracks))
}

fn mkv_tracks<R: Read + Seek>(
    r: &mut R,
    mut pos: u64,
    end: u64,
    tracks: &mut Vec<MkvTrack>,
) -> std::io::Result<()> {
    while let Some((id, body, Some(next))) = ebml(r, pos, end)? {
        if id == TRACK_ENTRY {
            let mut t = MkvTrack::default();
            let mut p = body;
            while let Some((id, b, Some(n))) = ebml(r, p, next)? {
                let v = read_at(r, b, (n - b).min(32) as usize)?;
                match id {
                    0xD7 => t.number = uint(&v),
                    0x56AA => t.codec_delay_ns = uint(&v),
                    0x86 => t.vorbis = v == b"A_VORBIS",
                    _ => {}
                }
                p = n;
            }
            // A second entry with the same number is symphonia's to judge; the first counts.
            if !tracks.iter().any(|x| x.number == t.number) {
                tracks.push(t);
            }
        }
        pos = next;
    }
    Ok(())
}

/// Walks a Cluster's blocks, counting each track's blocks and noting its DiscardPadding;
/// returns where the next Segment child starts.
fn mkv_cluster<R: Read + Seek>(
    r: &mut R,
    mut pos: u64,
    end: u64,
    unknown_size: bool,
    tracks: &mut [MkvTrack],
) -> std::io::Result<u64> {
    let block_track = |r: &mut R, at: u64| -> std::io::Result<Option<u64>> {
        Ok(vint(&read_at(r, at, 8)?, false).map(|(v, _)| v))
    };
    let count = |tracks: &mut [MkvTrack], number: Option<u64>, discard: Option<i64>| {
        if let Some(t) = tracks.iter_mut().find(|t| Some(t.number) == number) {
            // A DiscardPadding of 0 drops nothing (ffmpeg 5.1 writes one on the first block
            // of MP3 in Matroska): only one that drops frames counts.
            if let Some(d) = discard.filter(|&d| d != 0 && t.discard.is_none()) {
                t.discard = Some((t.blocks, d));
            }
            t.blocks += 1;
        }
    };
    while let Some((id, body, next)) = ebml(r, pos, end)? {
        if unknown_size && TOP.contains(&id) {
            return Ok(pos);
        }
        let Some(next) = next else { return Ok(end) };
        match id {
            0xA3 => {
                let n = block_track(r, body)?;
                count(tracks, n, None);
            }
            0xA0 => {
                let (mut number, mut discard) = (None, None);
                let mut p = body;
                while let Some((id, b, Some(n))) = ebml(r, p, next)? {
                    match id {
                        0xA1 => number = block_track(r, b)?,
                        0x75A2 => {
                            let v = read_at(r, b, (n - b).min(8) as usize)?;
                            let bits = 64 - 8 * v.len() as u32;
                            discard = Some(if v.is_empty() {
                                0
                            } else {
                                ((uint(&v) << bits) as i64) >> bits
                            });
                        }
                        _ => {}
                    }
                    p = n;
                }
                count(tracks, number, discard);
            }
            _ => {}
        }
        pos = next;
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_kept_and_dropped_where_the_container_says() {
        let t = Trim {
            skip: 1024,
            end: End::Keep(4000),
        };
        assert_eq!(t.kept(5120), 4000);
        assert_eq!(t.kept(3000), 1976);
        assert_eq!(t.window(0, 1024), 1024..1024);
        assert_eq!(t.window(1024, 1024), 0..1024);
        assert_eq!(t.window(4096, 1024), 0..928);
        assert_eq!(t.window(5120, 1024), 0..0);
        let t = Trim {
            skip: 256,
            end: End::Drop(96),
        };
        assert_eq!((t.before_drop(4352), t.kept(4352)), (4096, 4000));
        assert_eq!(t.kept(100), 0);
        // Rescaled to the nearest frame: 1105 frames at 8 kHz in ns, 500 ms in a 600 timescale.
        assert_eq!(frames(138_125_000, 1_000_000_000, 8000), 1105);
        assert_eq!(frames(300, 600, 44100), 22050);
        assert_eq!(frames(u64::MAX, 1, u32::MAX), u64::MAX);
    }

    #[test]
    fn ebml_sizes_are_bounded_by_their_parent() {
        assert_eq!(vint(&[0x81], false), Some((1, 1)));
        assert_eq!(
            vint(&[0x1A, 0x45, 0xDF, 0xA3], true),
            Some((0x1A45_DFA3, 4))
        );
        assert_eq!(vint(&[0], false), None);
        let mut c = std::io::Cursor::new(vec![0xA3, 0x88, 1, 2]);
        // 8 bytes claimed, 2 there: no element.
        assert_eq!(ebml(&mut c, 0, 4).unwrap(), None);
        let mut c = std::io::Cursor::new(vec![0x1F, 0x43, 0xB6, 0x75, 0xFF, 0xA3]);
        assert_eq!(ebml(&mut c, 0, 6).unwrap(), Some((CLUSTER, 5, None)));
    }
}

#[cfg(test)]
mod stated {
    use super::*;

    #[test]
    fn what_cannot_be_applied_exactly_is_refused() {
        let mkv = |discard| {
            Stated::Mkv(vec![MkvTrack {
                number: 1,
                codec_delay_ns: 128_000_000,
                vorbis: false,
                blocks: 5,
                discard,
            }])
        };
        let ok = mkv(Some((4, 12_000_000)))
            .trim(1, Some(8000), None)
            .unwrap();
        assert_eq!(
            ok,
            Trim {
                skip: 1024,
                end: End::Drop(96)
            }
        );
        let e = mkv(Some((2, 12_000_000)))
            .trim(1, Some(8000), None)
            .unwrap_err();
        assert!(e.contains("DiscardPadding on block 3 of 5"), "{e}");
        // Another track's numbers do not apply.
        assert_eq!(
            mkv(None).trim(2, Some(8000), None).unwrap(),
            Trim::default()
        );
        let mp4 = |edits: Vec<(u64, i64, i32)>| Stated::Mp4 {
            movie_timescale: 1000,
            tracks: vec![Mp4Track {
                id: 1,
                media_timescale: 44100,
                edit_count: edits.len() as u64,
                edits,
            }],
            itunsmpb: Some((2112, 0)),
        };
        // Timescales differ from the rate: 500 ms kept after 2112 frames skipped; the
        // iTunSMPB tag is ignored beside an edit list.
        let t = mp4(vec![(500, 2112, 0x1_0000)])
            .trim(1, Some(44100), None)
            .unwrap();
        assert_eq!(
            t,
            Trim {
                skip: 2112,
                end: End::Keep(22050)
            }
        );
        let e = mp4(vec![(100, -1, 0x1_0000), (500, 2112, 0x1_0000)])
            .trim(1, Some(44100), None)
            .unwrap_err();
        assert!(e.contains("2 edits with a delay"), "{e}");
        // No edit list: the sample table's end, less the tag's priming.
        let t = mp4(vec![])
            .trim(1, Some(44100), Some((24576, 44100)))
            .unwrap();
        assert_eq!(
            t,
            Trim {
                skip: 2112,
                end: End::Keep(22464)
            }
        );
    }
}
