//! Every container melctl reads through symphonia (FLAC, MP3, Ogg Vorbis/FLAC, AIFF/AIFF-C,
//! CAF, MP4/M4A with AAC or ALAC, ADTS AAC, Matroska/WebM, and ADPCM WAV), each opened with
//! its own reader at the offset [`crate::sniff`] found: symphonia's probe, which scans up
//! to 1 MiB for any marker, is not used. The frame count is what decoding every packet
//! gives: past the kept part (trim from the start) and in the dry run's probe the packets
//! are decoded and counted, not kept, so that [`crate::clip::settle`] holds the file to
//! its header's promise as for WAV, and the count does not depend on the clip, the trim
//! or the rate. Memory stays bounded: only the kept frames are held, and a file
//! needed whole (trim from the centre) is refused beyond
//! [`MAX_CLIPS_LONG`](crate::clip::MAX_CLIPS_LONG) clip lengths.

use std::io::{Seek, SeekFrom};
use std::path::Path;

use mel_core::spec::{AudioConfig, TrimPolicy};
use mel_core::{Error, Result};
use symphonia::core::codecs::audio::{AudioCodecId, AudioDecoderOptions, well_known as ids};
use symphonia::core::errors::Error as SymError;
use symphonia::core::formats::{FormatOptions, FormatReader, TrackType};
use symphonia::core::io::{MediaSource, MediaSourceStream};

use crate::clip::{DecodeInfo, check_finite, check_stream, fit_clip, keep_limit, settle, too_long};
use crate::mix::mix_interleaved;
use crate::sniff::Container;

/// symphonia's error as the kind it is.
fn sym_error(path: &Path, e: SymError) -> Error {
    match e {
        SymError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            Error::decode(path, "truncated: the file ends inside its header or data")
        }
        SymError::IoError(io) => Error::read(path, io),
        SymError::DecodeError(m) => Error::decode(path, format!("corrupt audio data: {m}")),
        SymError::Unsupported(m) => Error::unsupported(path, format!("unsupported: {m}")),
        SymError::LimitError(m) => Error::limit(
            path.display().to_string(),
            format!("beyond a decoder limit: {m}"),
        ),
        other => Error::decode(path, other.to_string()),
    }
}

/// Opens `source` as [`decode`] would and checks the first audio track (codec, channels,
/// rate) and its frame count, decoding every packet without keeping the samples.
pub(crate) fn probe(
    source: Box<dyn MediaSource + '_>,
    container: Container,
    offset: u64,
    path: &Path,
    audio: &AudioConfig,
) -> Result<()> {
    let mut s = Stream::open(source, container, offset, path)?;
    if let Some(ch) = s.channels {
        check_stream(path, audio, ch, s.rate.unwrap_or(0))?;
    }
    let decoded = s.count_rest(path, 0, None)?;
    // In decoding's order: the limit is met while decoding (on the frames held then,
    // before a padding known only at the end is dropped), the promise at the end.
    if let Some(rate) = s.rate.filter(|_| audio.trim == TrimPolicy::Center) {
        let limit = keep_limit(audio.clip_samples(), rate, audio);
        if s.trim.before_drop(decoded) >= limit as u64 {
            return Err(too_long(path, limit, rate));
        }
    }
    s.finish(path, s.trim.kept(decoded)).map(|_| ())
}

/// An opened container: its reader, the audio track, a decoder, and what the header says.
struct Stream<'s> {
    format: Box<dyn FormatReader + 's>,
    decoder: Box<dyn symphonia::core::codecs::audio::AudioDecoder>,
    track_id: u32,
    /// Frames the header promises, where the container's count is one (not an estimate),
    /// less the frames `trim` drops.
    promised: Option<u64>,
    /// The encoder priming and padding the container says to drop ([`crate::trim`]).
    trim: crate::trim::Trim,
    channels: Option<usize>,
    rate: Option<u32>,
    bits: u16,
    /// Whether the codec is float PCM (the one whose samples can be NaN or infinite).
    float: bool,
    scratch: Vec<f32>,
    /// A tagged MP3's promised end: symphonia trims every frame past it away, so data the
    /// tag does not count (files joined with `cat`) would vanish unseen.
    trimmed_end: Option<u64>,
    /// Native FLAC: the bytes its frames span (first frame's start, stream's end). Its
    /// reader drops a frame failing its CRC and resynchronises on the next: the frames'
    /// own numbers (packet timestamps) must then run on without a gap, and their bytes
    /// must add up to the span.
    flac_frames: Option<(u64, u64)>,
    /// FLAC: the timestamp the next packet must have.
    next_ts: u64,
    /// FLAC: the bytes of the packets read so far.
    frame_bytes: u64,
    /// Whether the reader stopped at an unexpected end of file (inside a packet or page).
    cut: bool,
}

impl<'s> Stream<'s> {
    fn open(
        source: Box<dyn MediaSource + 's>,
        container: Container,
        offset: u64,
        path: &Path,
    ) -> Result<Self> {
        let bad = |reason: &str| Error::decode(path, reason);
        let io = |e: std::io::Error| Error::read(path, e);
        let mut source = source;
        let len = source.byte_len();
        // The framing a reader would resynchronise across, checked from the bytes; a raw
        // stream is bounded before a trailing tag.
        let mut flac_frames = None;
        let mut variable_caf = false;
        if let Some(len) = len {
            let raw = matches!(
                container,
                Container::Flac | Container::Mp3 { .. } | Container::Adts
            );
            let end = if raw {
                crate::framing::audio_end(&mut source, offset, len).map_err(io)?
            } else {
                len
            };
            let verdict = match container {
                Container::Ogg => {
                    crate::framing::ogg_pages(&mut source, offset, len).map_err(io)?
                }
                Container::Adts => {
                    crate::framing::adts_frames(&mut source, offset, end).map_err(io)?
                }
                Container::Mp3 { .. } => {
                    crate::framing::mpeg_frames(&mut source, offset, end).map_err(io)?
                }
                _ => Ok(()),
            };
            verdict.map_err(|reason| Error::decode(path, reason))?;
            if container == Container::Flac {
                flac_frames = crate::framing::flac_frames_start(&mut source, offset, end)
                    .map_err(io)?
                    .map(|first| (first, end));
            }
            let mut patch = None;
            match container {
                Container::Aiff => {
                    if let Some(rate) =
                        crate::sniff::aiff_fractional_rate(&mut source, offset, len).map_err(io)?
                    {
                        return Err(fractional_rate(path, rate));
                    }
                }
                Container::Caf => {
                    if let Some(h) =
                        crate::sniff::caf_header(&mut source, offset, len).map_err(io)?
                    {
                        caf_check(path, &h)?;
                        variable_caf = h.variable;
                        // A streaming writer's "to the end of the file", as symphonia
                        // does not read it: the size the data has.
                        if let (Some(at), Some(start)) = (h.streamed_size_at, h.data_start) {
                            patch = Some((at, (len.saturating_sub(start) as i64).to_be_bytes()));
                        }
                    }
                }
                _ => {}
            }
            if end < len || patch.is_some() {
                source.seek(SeekFrom::Start(0)).map_err(io)?;
                source = Box::new(crate::framing::Bounded::new(source, end, patch).map_err(io)?);
            }
        }
        let mut mss = MediaSourceStream::new(source, Default::default());
        // AIFF's own promise, which symphonia does not keep (it counts the SSND data).
        let aiff_frames = match (container, mss.byte_len()) {
            (Container::Aiff, Some(len)) => {
                crate::sniff::aiff_promised_frames(&mut mss, offset, len)
                    .map_err(|e| Error::read(path, e))?
            }
            _ => None,
        };
        // Encoder priming and padding, which symphonia's MP4 and Matroska readers state
        // (or not) but never drop.
        let stated = match mss.byte_len() {
            Some(len) => crate::trim::read(&mut mss, container, offset, len)
                .map_err(|e| Error::read(path, e))?,
            None => crate::trim::Stated::None,
        };
        mss.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::read(path, e))?;
        let format = open_reader(mss, container).map_err(|e| sym_error(path, e))?;
        let track = format
            .default_track(TrackType::Audio)
            .ok_or_else(|| bad("no audio track"))?;
        let params = track
            .codec_params
            .as_ref()
            .and_then(|p| p.audio())
            .ok_or_else(|| bad("no audio codec parameters"))?
            .clone();
        // MP3 without a Xing/Info/VBRI tag, ADTS and Matroska only estimate their length.
        // A CAF packet table's frame count is no promise either: ffmpeg writes packets x
        // frames per packet there (16384 for 16000 frames of ALAC), and the decoder knows
        // the last packet's length; a cut file is found by its packets, each of a size
        // the table gives, ending early.
        let promises = !matches!(
            container,
            Container::Mp3 { tagged: false } | Container::Adts | Container::Mkv
        ) && !variable_caf;
        // The sample table's length, in its time base, for an MP4 without an edit list.
        let media = track.num_frames.map(|n| match track.time_base {
            Some(tb) => (
                n.saturating_mul(tb.numer.get() as u64),
                tb.denom.get() as u64,
            ),
            None => (n, params.sample_rate.unwrap_or(0) as u64),
        });
        let trim = stated
            .trim(track.id, params.sample_rate, media)
            .map_err(|reason| Error::unsupported(path, reason))?;
        let promised = aiff_frames
            .or(track.num_frames.filter(|_| promises))
            .map(|p| trim.kept(p));
        let track_id = track.id;
        let mut for_decoder = params.clone();
        if [ids::CODEC_ID_PCM_ALAW, ids::CODEC_ID_PCM_MULAW].contains(&params.codec) {
            // G.711's widths are implicit: CAF gives 8 bits, which symphonia's PCM decoder
            // takes for the decoded width and refuses ("unexpected bits per sample").
            for_decoder.bits_per_sample = None;
            for_decoder.bits_per_coded_sample = None;
        }
        let decoder = symphonia::default::get_codecs()
            .make_audio_decoder(&for_decoder, &AudioDecoderOptions::default())
            .map_err(|e| match e {
                SymError::Unsupported(_) => Error::unsupported(
                    path,
                    format!("unsupported codec: {}", codec_name(params.codec)),
                ),
                e => sym_error(path, e),
            })?;
        Ok(Stream {
            format,
            decoder,
            track_id,
            promised,
            trim,
            channels: params.channels.as_ref().map(|c| c.count()),
            rate: params.sample_rate,
            bits: params.bits_per_sample.unwrap_or(0) as u16,
            float: [
                ids::CODEC_ID_PCM_F32LE,
                ids::CODEC_ID_PCM_F32BE,
                ids::CODEC_ID_PCM_F64LE,
                ids::CODEC_ID_PCM_F64BE,
                ids::CODEC_ID_PCM_F32LE_PLANAR,
                ids::CODEC_ID_PCM_F32BE_PLANAR,
                ids::CODEC_ID_PCM_F64LE_PLANAR,
                ids::CODEC_ID_PCM_F64BE_PLANAR,
            ]
            .contains(&params.codec),
            scratch: Vec::new(),
            trimmed_end: promised.filter(|_| matches!(container, Container::Mp3 { tagged: true })),
            flac_frames,
            next_ts: 0,
            frame_bytes: 0,
            cut: false,
        })
    }

    /// The next packet of the audio track; `None` at the end (a file cut inside a packet
    /// ends there too, and the frame count says whether that is short).
    fn next(&mut self, path: &Path) -> Result<Option<symphonia::core::packet::Packet>> {
        loop {
            match self.format.next_packet() {
                Ok(Some(p)) if p.track_id == self.track_id => {
                    self.check_not_past_the_promise(path, &p)?;
                    self.check_flac_continuity(path, &p)?;
                    return Ok(Some(p));
                }
                Ok(Some(_)) => continue,
                Ok(None) => return Ok(None),
                Err(SymError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    // Judged by `finish`, after the header's promise.
                    self.cut = true;
                    return Ok(None);
                }
                Err(e) => return Err(sym_error(path, e)),
            }
        }
    }

    /// Refuses a packet that starts a whole MPEG frame (1,152 samples, the most one holds)
    /// past a tagged MP3's promised end: its data holds more than its tag says, and
    /// symphonia would trim the rest away (ffmpeg decodes it). An inconsistent header is
    /// refused, never half-read.
    fn check_not_past_the_promise(
        &self,
        path: &Path,
        p: &symphonia::core::packet::Packet,
    ) -> Result<()> {
        const MPEG_FRAME: u64 = 1152;
        match self.trimmed_end {
            Some(end)
                if p.pts.get() >= 0 && p.pts.get() as u64 >= end.saturating_add(MPEG_FRAME) =>
            {
                Err(Error::decode(
                    path,
                    format!(
                        "inconsistent header: the MP3's Xing/Info/VBRI tag promises {end} frames, but the stream goes on past them (files joined end to end?)"
                    ),
                ))
            }
            _ => Ok(()),
        }
    }

    /// FLAC: a packet must start where the last one ended (its frame number says where),
    /// or the reader skipped a damaged frame.
    fn check_flac_continuity(
        &mut self,
        path: &Path,
        p: &symphonia::core::packet::Packet,
    ) -> Result<()> {
        if self.flac_frames.is_none() {
            return Ok(());
        }
        let ts = p.pts.get();
        if ts != self.next_ts as i64 {
            let what = if ts > self.next_ts as i64 {
                format!("{} frames missing", ts as u64 - self.next_ts)
            } else {
                format!("a frame out of order (it says frame {ts})")
            };
            return Err(Error::decode(
                path,
                format!(
                    "corrupt audio data: {what} at frame {} (a damaged FLAC frame, skipped by the reader)",
                    self.next_ts
                ),
            ));
        }
        self.next_ts = self.next_ts.saturating_add(p.dur.get());
        self.frame_bytes = self.frame_bytes.saturating_add(p.data.len() as u64);
        Ok(())
    }

    /// The verdict once every packet is read (`held` frames): the header's promise
    /// ([`settle`]), then a file cut inside a packet or page, then FLAC bytes that were
    /// no frame. Returns the frame count to report.
    fn finish(&self, path: &Path, held: u64) -> Result<usize> {
        let frames = settle(path, self.promised, held)?;
        if self.cut {
            return Err(Error::decode(
                path,
                format!("truncated: the file ends inside its data, after frame {held}"),
            ));
        }
        if let Some((first, end)) = self.flac_frames {
            let span = end.saturating_sub(first);
            if self.frame_bytes < span {
                return Err(Error::decode(
                    path,
                    format!(
                        "corrupt audio data: {} of the FLAC stream's bytes, from byte {}, are no valid frame (damaged or cut data, skipped by the reader, after frame {held})",
                        span - self.frame_bytes,
                        first + self.frame_bytes
                    ),
                ));
            }
        }
        Ok(frames)
    }

    /// Frames in the packets left, decoded and counted but not kept (packet durations
    /// are no substitute: symphonia's MP3 reader counts encoder delay and padding in them,
    /// its Ogg reader does not, Matroska often gives none). Float PCM is checked for NaN
    /// and infinity on the way, so that the verdict does not depend on the part kept.
    /// `layout` is the (rate, channels) of the packets decoded before, if any: like
    /// decoding, the count refuses a stream whose layout changes.
    fn count_rest(
        &mut self,
        path: &Path,
        start: u64,
        mut layout: Option<(u32, usize)>,
    ) -> Result<u64> {
        let mut n = 0u64;
        while let Some(p) = self.next(path)? {
            let buf = self.decoder.decode(&p).map_err(|e| sym_error(path, e))?;
            let spec = (buf.spec().rate(), buf.spec().channels().count());
            check_layout(path, spec, layout)?;
            layout = Some(spec);
            let ch = spec.1;
            if self.float {
                self.scratch.resize(buf.samples_interleaved(), 0.0);
                buf.copy_to_slice_interleaved(&mut self.scratch);
                check_finite(path, &self.scratch, (start + n) as usize, ch)?;
            }
            n = n.saturating_add((buf.samples_interleaved() / ch) as u64);
        }
        Ok(n)
    }
}

/// A sample rate that is not a whole number of hertz, refused by name: melctl's rates are
/// whole, and taking its integer part would store the audio at a rate it is not.
fn fractional_rate(path: &Path, rate: f64) -> Error {
    Error::unsupported(
        path,
        format!(
            "unsupported sample rate: {rate} Hz is not a whole number of hertz (taking {} Hz would shift every pitch)",
            rate.trunc()
        ),
    )
}

/// What a CAF header says that symphonia would read wrong or refuse unclearly: a
/// fractional rate, 8-bit PCM (symphonia reads 16, 24 and 32 bits).
fn caf_check(path: &Path, h: &crate::sniff::CafHeader) -> Result<()> {
    if h.rate.is_finite() && h.rate > 0.0 && h.rate.fract() != 0.0 {
        return Err(fractional_rate(path, h.rate));
    }
    if &h.format == b"lpcm" && !matches!(h.bits, 16 | 24 | 32 | 64) {
        return Err(Error::unsupported(
            path,
            format!(
                "unsupported sample format: {}-bit PCM in CAF (melctl reads 16, 24 and 32-bit integer and 32/64-bit float CAF)",
                h.bits
            ),
        ));
    }
    Ok(())
}

/// A decoded buffer's (rate, channels) must be usable and the same as the one before.
fn check_layout(path: &Path, (rate, ch): (u32, usize), before: Option<(u32, usize)>) -> Result<()> {
    let bad = |reason: &str| Err(Error::decode(path, reason));
    if ch == 0 {
        return bad("zero channels");
    }
    if rate == 0 {
        return bad("zero sample rate");
    }
    if before.is_some_and(|b| b != (rate, ch)) {
        return bad("the sample rate or channel count changes inside the file");
    }
    Ok(())
}

/// symphonia's reader for `container`, on `mss` positioned at its first byte.
fn open_reader<'s>(
    mss: MediaSourceStream<'s>,
    container: Container,
) -> symphonia::core::errors::Result<Box<dyn FormatReader + 's>> {
    use symphonia::default::formats as f;
    let o = FormatOptions::default();
    Ok(match container {
        Container::Wav => Box::new(f::WavReader::try_new(mss, o)?),
        Container::Flac => Box::new(f::FlacReader::try_new(mss, o)?),
        Container::Mp3 { .. } => Box::new(f::MpaReader::try_new(mss, o)?),
        Container::Ogg => Box::new(f::OggReader::try_new(mss, o)?),
        Container::Aiff => Box::new(f::AiffReader::try_new(mss, o)?),
        Container::Caf => Box::new(f::CafReader::try_new(mss, o)?),
        Container::Mp4 => Box::new(f::IsoMp4Reader::try_new(mss, o)?),
        Container::Adts => Box::new(f::AdtsReader::try_new(mss, o)?),
        Container::Mkv => Box::new(f::MkvReader::try_new(mss, o)?),
    })
}

/// A codec's name for the "unsupported codec" message.
fn codec_name(id: AudioCodecId) -> String {
    let known = [
        (ids::CODEC_ID_OPUS, "Opus"),
        (ids::CODEC_ID_SPEEX, "Speex"),
        (ids::CODEC_ID_AC3, "AC-3"),
        (ids::CODEC_ID_EAC3, "E-AC-3"),
        (ids::CODEC_ID_AC4, "AC-4"),
        (ids::CODEC_ID_DCA, "DTS"),
        (ids::CODEC_ID_WMA, "Windows Media Audio"),
        (ids::CODEC_ID_MP1, "MPEG audio layer I"),
        (ids::CODEC_ID_MP2, "MPEG audio layer II"),
        (ids::CODEC_ID_MUSEPACK, "Musepack"),
        (ids::CODEC_ID_ADPCM_G722, "G.722 ADPCM"),
        (ids::CODEC_ID_ADPCM_G726, "G.726 ADPCM"),
        (ids::CODEC_ID_ADPCM_G726LE, "G.726 ADPCM"),
        (ids::CODEC_ID_ADPCM_IMA_QT, "QuickTime IMA ADPCM"),
        (ids::CODEC_ID_ATRAC3, "ATRAC3"),
        (ids::CODEC_ID_ATRAC3PLUS, "ATRAC3plus"),
        (ids::CODEC_ID_COOK, "RealAudio Cook"),
        (ids::CODEC_ID_SBC, "SBC"),
        (ids::CODEC_ID_APTX, "aptX"),
    ];
    known
        .iter()
        .find(|(k, _)| *k == id)
        .map(|(_, n)| n.to_string())
        .unwrap_or_else(|| format!("codec id {id}"))
}

/// Decodes `source` (the file at `path`, holding `container` at `offset`) into `dst`.
pub(crate) fn decode(
    source: Box<dyn MediaSource + '_>,
    container: Container,
    offset: u64,
    path: &Path,
    audio: &AudioConfig,
    dst: &mut [f32],
) -> Result<DecodeInfo> {
    let bad = |reason: String| Error::decode(path, reason);
    let mut s = Stream::open(source, container, offset, path)?;
    let clip = dst.len();
    let mut rate: Option<u32> = None;
    let mut channels = 0usize;
    let mut mono: Vec<f32> = Vec::new();
    let mut interleaved: Vec<f32> = Vec::new();
    let mut limit = usize::MAX;
    let mut counted = 0u64;
    let mut stopped = false;
    while let Some(packet) = s.next(path)? {
        let buf = s.decoder.decode(&packet).map_err(|e| sym_error(path, e))?;
        let spec = buf.spec();
        let (r, ch) = (spec.rate(), spec.channels().count());
        check_layout(path, (r, ch), rate.map(|x| (x, channels)))?;
        if rate.is_none() {
            check_stream(path, audio, ch, r)?;
            limit = keep_limit(clip, r, audio);
        }
        rate = Some(r);
        channels = ch;
        interleaved.resize(buf.samples_interleaved(), 0.0);
        buf.copy_to_slice_interleaved(&mut interleaved);
        check_finite(path, &interleaved, counted as usize, ch)?;
        let n = interleaved.len() / ch;
        let kept = s.trim.window(counted, n);
        counted += n as u64;
        mix_interleaved(
            &interleaved[kept.start * ch..kept.end * ch],
            ch,
            audio.downmix,
            &mut mono,
        );
        if mono.len() >= limit {
            if audio.trim == TrimPolicy::Center {
                return Err(too_long(path, limit, r));
            }
            mono.truncate(limit);
            stopped = true;
            break;
        }
    }
    // Past the kept part, the rest of the file is decoded and counted, not kept.
    let rest = if stopped {
        s.count_rest(path, counted, rate.map(|r| (r, channels)))?
    } else {
        0
    };
    let frames = s.finish(path, s.trim.kept(counted.saturating_add(rest)))?;
    // Padding known only at the end (Matroska's DiscardPadding) leaves the clip here.
    mono.truncate(frames);
    let rate = rate.ok_or_else(|| bad("no audio samples".into()))?;
    fit_clip(&mono, rate, audio, dst)
        .map_err(|e| Error::limit(path.display().to_string(), e.to_string()))?;
    Ok(DecodeInfo {
        rate,
        frames,
        channels: channels as u16,
        bits: s.bits,
    })
}
