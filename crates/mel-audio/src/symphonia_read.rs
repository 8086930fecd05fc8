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
//!
//! A symphonia error never reaches the user as symphonia words it ([`sym_error`]): each is
//! named by what failed where (container or codec, header or packet, frame), or by
//! melctl's words for the refusals worth naming ([`known`]). What symphonia reads wrong is
//! caught before it decodes: float sample rates ([`rate_check`]), AAC profiles and channel
//! layouts its decoder does not decode ([`aac_check`]), a FLAC STREAMINFO its frames
//! contradict, chained Ogg files, cut MP4 and Matroska files ([`crate::framing`]).

use std::io::{Seek, SeekFrom};
use std::path::Path;

use mel_core::spec::{AudioConfig, TrimPolicy};
use mel_core::{Error, Result};
use symphonia::core::codecs::audio::{AudioCodecId, AudioDecoderOptions, well_known as ids};
use symphonia::core::errors::Error as SymError;
use symphonia::core::formats::{FormatOptions, FormatReader, TrackType};
use symphonia::core::io::{MediaSource, MediaSourceStream};
use symphonia::core::packet::Packet;
use symphonia::core::units::{Duration, Timestamp};

use crate::clip::{
    DecodeInfo, Dst, check_finite, check_float, check_stream, keep_limit, settle, too_long,
};
use crate::mix::mix_interleaved;
use crate::resample::MAX_RATE;
use crate::sniff::Container;

/// Where a symphonia call failed, for the words of its error.
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// Opening the container: reading its header.
    Open,
    /// Making the decoder from the header's codec parameters.
    Setup,
    /// Reading the packet after this many decoded frames.
    Read(u64),
    /// Decoding the packet after this many decoded frames.
    Decode(u64),
}

/// symphonia's error as the kind it is, in melctl's words: a symphonia message is never the
/// reason (it names the library's internals, `mp4: invalid atom size`, or the wrong cause,
/// `decoder needs to be reset`). Known refusals are named ([`known`]); the rest say what
/// failed where (the container or codec, the stage, the frame).
fn sym_error(
    path: &Path,
    container: Container,
    codec: Option<AudioCodecId>,
    stage: Stage,
    e: SymError,
) -> Error {
    let c = container.name();
    let codec = codec
        .and_then(codec_known_name)
        .map_or_else(|| format!("{c} audio"), str::to_string);
    let decode = |reason: String| Error::decode(path, reason);
    let corrupt = || match stage {
        Stage::Open => decode(format!(
            "malformed {c} header: damaged, or not a valid {c} file (its reader refused it)"
        )),
        Stage::Setup => decode(format!(
            "malformed {codec} configuration in the {c} header (its decoder refused it)"
        )),
        Stage::Read(n) => decode(format!(
            "corrupt audio data: a damaged {c} packet after frame {n} (its reader refused it)"
        )),
        Stage::Decode(n) => decode(format!(
            "corrupt audio data: the {codec} packet after frame {n} does not decode (damaged, or not valid {codec})"
        )),
    };
    match e {
        SymError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => match stage {
            Stage::Open | Stage::Setup => decode(format!(
                "truncated: the file ends inside its {c} header"
            )),
            Stage::Read(n) | Stage::Decode(n) => decode(format!(
                "truncated: the file ends inside its data, after frame {n}"
            )),
        },
        // An operating system's error is the reason; one the library made (a bit reader
        // running past a packet's end) is the data's.
        SymError::IoError(io) if io.raw_os_error().is_some() => Error::read(path, io),
        SymError::IoError(_) => corrupt(),
        SymError::DecodeError(m) => match known(m) {
            Some(reason) => decode(reason.into()),
            None => corrupt(),
        },
        SymError::Unsupported(m) => Error::unsupported(
            path,
            match known(m) {
                Some(reason) => reason.to_string(),
                None => match stage {
                    Stage::Open => {
                        format!("unsupported: this {c} file uses a feature its reader does not handle")
                    }
                    Stage::Setup => format!(
                        "unsupported: the {codec} configuration in the {c} header is one its decoder does not handle (damaged, or a variant melctl does not decode)"
                    ),
                    Stage::Read(n) | Stage::Decode(n) => format!(
                        "unsupported: {codec} data using a feature melctl's decoder does not handle, after frame {n}"
                    ),
                },
            },
        ),
        SymError::LimitError(_) => Error::limit(
            path.display().to_string(),
            format!("the {c} file is beyond a limit of its reader (a header or packet too large)"),
        ),
        SymError::ResetRequired => Error::unsupported(
            path,
            match container {
                Container::Ogg => "unsupported: a chained Ogg stream (a second logical stream follows the first; melctl decodes Ogg files of one stream)".to_string(),
                _ => format!("unsupported: the {c} stream changes its codec or layout part-way"),
            },
        ),
        // melctl never seeks: no stage can meet one. Errors symphonia adds later are the
        // stage's failure too.
        _ => corrupt(),
    }
}

/// melctl's words for the symphonia refusals worth naming (what the file is, not which of
/// symphonia's lines refused it). The list was made from the messages symphonia 0.6.1's
/// readers and decoders for melctl's formats can give (`grep unsupported_error`), and from
/// the ones cut and damaged corpus files meet (corpus.rs,
/// `a_decoder_librarys_message_is_never_the_reason`).
fn known(m: &str) -> Option<&'static str> {
    Some(match m {
        "aac: program config" | "aac: channels or channel layout is required" => {
            "unsupported: AAC whose channel layout is in its stream (a program config element; melctl decodes mono and stereo AAC-LC)"
        }
        "aac: coupling channel element" => {
            "unsupported: AAC with a coupling channel element (melctl decodes mono and stereo AAC-LC)"
        }
        "aac: gain control data" => {
            "unsupported codec: AAC SSR (gain control; melctl decodes AAC-LC)"
        }
        "aac: predictor data" => {
            "unsupported codec: AAC with prediction (Main or LTP profile; melctl decodes AAC-LC)"
        }
        "adts: only 1 aac frame per adts packet is supported" => {
            "unsupported: ADTS frames holding several AAC frames each"
        }
        "mpa: free bit-rate is not supported" => {
            "unsupported: free-format MP3 (no bit rate in its frame headers)"
        }
        "flac: lpc shifts less than 0 are not supported" => {
            "unsupported: FLAC with a negative LPC shift"
        }
        "vorbis: only a maximum of 32 channels are supported"
        | "vorbis: unknown channel map (fix me)" => {
            "unsupported: Vorbis with more channels than its standard layouts (melctl decodes 1 to 8)"
        }
        "vorbis: only vorbis 1 is supported" | "ogg (vorbis): only vorbis 1 is supported" => {
            "unsupported codec: a Vorbis version other than Vorbis I"
        }
        "isomp4 (stsd): more than 1 sample entry" => {
            "unsupported: an MP4 audio track with several sample descriptions"
        }
        "isomp4: maximum 32 channels" | "isomp4: unsupported number of channels" => {
            "unsupported: an MP4 audio track's channel count (over 32, or none)"
        }
        "caf: unsupported channel count" => "unsupported: a CAF file's channel count",
        "caf: unsupported bits per channel" => {
            "unsupported sample format: a CAF file's bits per channel"
        }
        "caf: unsupported codec" | "caf: unsupported format id" => {
            "unsupported codec: a CAF format melctl does not decode"
        }
        "aifc: compression type not supported" => {
            "unsupported codec: AIFF-C with a compression melctl does not read"
        }
        "mkv: missing segment element" => "malformed Matroska file: no Segment element",
        "mkv: not a matroska / webm file" => {
            "unsupported format: an EBML file that is neither Matroska nor WebM"
        }
        "isomp4: missing moov atom" => {
            "malformed MP4 file: no moov box (the movie header; a recorder stopped before writing it?)"
        }
        "isomp4: missing ftyp atom" => "malformed MP4 file: no ftyp box",
        "ogg: page is not marked as first" => {
            "malformed Ogg file: its first page begins no stream (the start of the file is missing?)"
        }
        "adpcm: up to two channels are supported" => {
            "unsupported: ADPCM with more than two channels (melctl decodes mono and stereo ADPCM)"
        }
        _ => return None,
    })
}

/// Opens `source` as [`decode`] would and checks the first audio track (codec, channels,
/// rate) and its frame count, decoding every packet without keeping the samples.
pub(crate) fn probe(
    source: Box<dyn MediaSource + '_>,
    container: Container,
    offset: u64,
    path: &Path,
    audio: &AudioConfig,
) -> Result<(u32, u64)> {
    let mut s = Stream::open(source, container, offset, path)?;
    if let Some(ch) = s.channels {
        check_stream(path, audio, ch, s.rate.unwrap_or(0))?;
    }
    let decoded = s.count_rest(path, None)?;
    // In decoding's order: the limit is met while decoding (on the frames held then,
    // before a padding known only at the end is dropped), the promise at the end.
    if let Some(rate) = s.rate.filter(|_| audio.trim == TrimPolicy::Center) {
        let limit = keep_limit(audio.clip_samples(), rate, audio);
        if s.trim.before_drop(decoded) >= limit as u64 {
            return Err(too_long(path, limit, rate));
        }
    }
    let frames = s.finish(path, s.trim.kept(decoded))?;
    let rate = s
        .rate
        .ok_or_else(|| Error::decode(path, "no audio samples"))?;
    Ok((rate, frames as u64))
}

/// An opened container: its reader, the audio track, a decoder, and what the header says.
struct Stream<'s> {
    format: Box<dyn FormatReader + 's>,
    decoder: Box<dyn symphonia::core::codecs::audio::AudioDecoder>,
    track_id: u32,
    /// The container and codec, for the words of an error.
    container: Container,
    codec: AudioCodecId,
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
    scratch: Vec<f64>,
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
    /// ADPCM WAV: the partial block after the last whole one, which symphonia's reader
    /// drops (its bytes, padded to a whole block, and the whole frames it holds).
    adpcm_tail: Option<(Box<[u8]>, usize)>,
    /// Frames per ADPCM block.
    adpcm_block_frames: u64,
    /// The frames to keep of the packet last read, when not all it decodes to (the
    /// partial ADPCM block).
    keep: Option<usize>,
    /// Frames decoded so far, for the words of an error.
    at: u64,
}

/// What a container's bytes say before symphonia reads them (the framing a reader would
/// resynchronise across, checked from the bytes), and the source symphonia is to read: a
/// raw stream bounded before a trailing tag, header fields patched where symphonia would
/// misread them.
struct Framing<'s> {
    source: Box<dyn MediaSource + 's>,
    /// Native FLAC: the bytes its frames span ([`Stream::flac_frames`]).
    flac_frames: Option<(u64, u64)>,
    /// A CAF file whose packets vary in size (its packet table's count is no promise).
    variable_caf: bool,
    /// Ogg FLAC: the total its STREAMINFO states.
    ogg_flac_total: Option<u64>,
    /// ADPCM WAV: the partial last block ([`Stream::adpcm_tail`]).
    adpcm: Option<(Box<[u8]>, usize)>,
}

impl<'s> Framing<'s> {
    /// Checks the bytes of `source` (a `container` at `offset`) where their length is
    /// known; a source of unknown length is read as it is.
    fn check(
        source: Box<dyn MediaSource + 's>,
        container: Container,
        offset: u64,
        path: &Path,
    ) -> Result<Self> {
        let io = |e: std::io::Error| Error::read(path, e);
        let mut source = source;
        let Some(len) = source.byte_len() else {
            return Ok(Framing {
                source,
                flac_frames: None,
                variable_caf: false,
                ogg_flac_total: None,
                adpcm: None,
            });
        };
        let mut patches = Vec::new();
        let end = framing_end(&mut source, container, offset, len, path, &mut patches)?;
        let mut flac_frames = None;
        if container == Container::Flac {
            flac_frames = flac_span(&mut source, offset, end, path)?;
        }
        let mut ogg_flac_total = None;
        if container == Container::Ogg {
            ogg_flac_total = crate::framing::ogg_flac_total(&mut source, offset).map_err(io)?;
        }
        let mut adpcm = None;
        if container == Container::Wav {
            // ADPCM (the one WAV coding routed here): a partial last block.
            if let Ok(h) = crate::wav::parse(&mut source, offset, len).map_err(io)? {
                adpcm = adpcm_tail(&mut source, &h).map_err(io)?;
            }
        }
        if container == Container::Adts {
            adts_profile_check(&mut source, offset).map_err(|e| match e {
                Ok(io_err) => io(io_err),
                Err(reason) => Error::unsupported(path, reason),
            })?;
        }
        let variable_caf = header_checks(&mut source, container, offset, len, path, &mut patches)?;
        if end < len || !patches.is_empty() {
            source.seek(SeekFrom::Start(0)).map_err(io)?;
            source = Box::new(crate::framing::Bounded::new(source, end, patches).map_err(io)?);
        }
        Ok(Framing {
            source,
            flac_frames,
            variable_caf,
            ogg_flac_total,
            adpcm,
        })
    }
}

/// Where the audio of a `container` of `len` bytes ends (a raw stream's before a trailing
/// tag; an ADTS or MP3 stream's where its frames end), its framing checked; an Ogg file's
/// page patches go to `patches`.
fn framing_end<R: std::io::Read + Seek>(
    source: &mut R,
    container: Container,
    offset: u64,
    len: u64,
    path: &Path,
    patches: &mut Vec<crate::framing::Patch>,
) -> Result<u64> {
    let io = |e: std::io::Error| Error::read(path, e);
    let raw = matches!(
        container,
        Container::Flac | Container::Mp3 { .. } | Container::Adts
    );
    let mut end = if raw {
        crate::framing::audio_end(source, offset, len).map_err(io)?
    } else {
        len
    };
    let verdict = match container {
        Container::Ogg => crate::framing::ogg_pages(source, offset, len)
            .map_err(io)?
            .map(|p| *patches = p),
        Container::Adts => crate::framing::adts_frames(source, offset, end)
            .map_err(io)?
            .map(|e| end = e),
        Container::Mp3 { .. } => crate::framing::mpeg_frames(source, offset, end)
            .map_err(io)?
            .map(|e| end = e),
        Container::Mp4 => crate::framing::mp4_boxes(source, offset, len).map_err(io)?,
        Container::Mkv => crate::framing::mkv_segment(source, offset, len).map_err(io)?,
        _ => Ok(()),
    };
    verdict.map_err(|reason| Error::decode(path, reason))?;
    Ok(end)
}

/// Native FLAC ending at `end`: the bytes its frames span, the STREAMINFO checked against
/// the first frame.
fn flac_span<R: std::io::Read + Seek>(
    source: &mut R,
    offset: u64,
    end: u64,
    path: &Path,
) -> Result<Option<(u64, u64)>> {
    let io = |e: std::io::Error| Error::read(path, e);
    let flac_frames = crate::framing::flac_frames_start(source, offset, end)
        .map_err(io)?
        .map(|first| (first, end));
    if let Some((first, _)) = flac_frames {
        crate::framing::flac_header_check(source, offset, first)
            .map_err(io)?
            .map_err(|reason| Error::decode(path, reason))?;
    }
    Ok(flac_frames)
}

/// AIFF's and CAF's headers, which symphonia reads wrong: the sample rate checked, and a
/// CAF's streamed data size patched to the size the data has; whether the CAF's packets
/// vary in size.
fn header_checks<R: std::io::Read + Seek>(
    source: &mut R,
    container: Container,
    offset: u64,
    len: u64,
    path: &Path,
    patches: &mut Vec<crate::framing::Patch>,
) -> Result<bool> {
    let io = |e: std::io::Error| Error::read(path, e);
    let mut variable_caf = false;
    match container {
        Container::Aiff => {
            if let Some((rate, whole)) = crate::sniff::aiff_rate(source, offset, len).map_err(io)? {
                rate_check(path, "AIFF", rate, whole)?;
            }
        }
        Container::Caf => {
            if let Some(h) = crate::sniff::caf_header(source, offset, len).map_err(io)? {
                caf_check(path, &h)?;
                variable_caf = h.variable;
                // A streaming writer's "to the end of the file", as symphonia
                // does not read it: the size the data has.
                if let (Some(at), Some(start)) = (h.streamed_size_at, h.data_start) {
                    let size = len.saturating_sub(start) as i64;
                    patches.push((at, size.to_be_bytes().to_vec()));
                }
            }
        }
        _ => {}
    }
    Ok(variable_caf)
}

/// What the container states that symphonia does not keep: AIFF's own frame count (it
/// counts the SSND data), and the encoder priming and padding its MP4 and Matroska
/// readers state (or not) but never drop.
fn container_notes(
    mss: &mut MediaSourceStream<'_>,
    container: Container,
    offset: u64,
    path: &Path,
) -> Result<(Option<u64>, crate::trim::Stated)> {
    let aiff_frames = match (container, mss.byte_len()) {
        (Container::Aiff, Some(len)) => crate::sniff::aiff_promised_frames(mss, offset, len)
            .map_err(|e| Error::read(path, e))?,
        _ => None,
    };
    let stated = match mss.byte_len() {
        Some(len) => {
            crate::trim::read(mss, container, offset, len).map_err(|e| Error::read(path, e))?
        }
        None => crate::trim::Stated::None,
    };
    Ok((aiff_frames, stated))
}

/// The sample rate the decoder follows: AAC's own configuration says what the sample
/// entry cannot (an MP4 sample entry's 16-bit rate field cannot hold 96000; ffmpeg 5.1
/// writes 0 there, 9.0 writes 48000, the AudioSpecificConfig holds it), and an AAC
/// profile or layout its decoder does not decode is refused.
fn decoder_rate(
    params: &symphonia::core::codecs::audio::AudioCodecParameters,
    path: &Path,
) -> Result<Option<u32>> {
    let asc = (params.codec == ids::CODEC_ID_AAC)
        .then(|| {
            params
                .extra_data
                .as_deref()
                .and_then(AudioSpecificConfig::read)
        })
        .flatten();
    let rate = asc
        .and_then(|a| a.rate)
        .or(params.sample_rate)
        .filter(|&r| r > 0);
    if let Some(a) = asc {
        a.check()
            .map_err(|reason| Error::unsupported(path, reason))?;
    }
    Ok(rate)
}

/// Whether the container's frame count is a promise. MP3 without a Xing/Info/VBRI tag,
/// ADTS and Matroska only estimate their length. A CAF packet table's frame count is no
/// promise either: ffmpeg writes packets x frames per packet there (16384 for 16000
/// frames of ALAC), and the decoder knows the last packet's length; a cut file is found
/// by its packets, each of a size the table gives, ending early. An Ogg stream's last
/// granule position and an MP4 sample table's durations are a timeline, not a count of
/// the data: ffmpeg's `-stream_loop` leaves a gap in the timestamps at each loop (the
/// source's priming, which its decoder dropped: 1105 frames from an MP3, 1024 from AAC),
/// so the last timestamp says up to thousands of frames more than every packet decodes
/// to (libsndfile and ffmpeg decode exactly what melctl does). A cut Ogg file is found by
/// its pages, a cut MP4 by its box sizes ([`crate::framing`]); Ogg FLAC is held to its
/// STREAMINFO total when it states one.
fn count_is_promise(container: Container, variable_caf: bool) -> bool {
    !matches!(
        container,
        Container::Mp3 { tagged: false }
            | Container::Adts
            | Container::Mkv
            | Container::Ogg
            | Container::Mp4
    ) && !variable_caf
}

/// The decoder for `params` at `rate`; a codec with no decoder at all is named.
fn make_decoder(
    params: &symphonia::core::codecs::audio::AudioCodecParameters,
    rate: Option<u32>,
    container: Container,
    path: &Path,
) -> Result<Box<dyn symphonia::core::codecs::audio::AudioDecoder>> {
    let mut for_decoder = params.clone();
    if [ids::CODEC_ID_PCM_ALAW, ids::CODEC_ID_PCM_MULAW].contains(&params.codec) {
        // G.711's widths are implicit: CAF gives 8 bits, which symphonia's PCM decoder
        // takes for the decoded width and refuses ("unexpected bits per sample").
        for_decoder.bits_per_sample = None;
        for_decoder.bits_per_coded_sample = None;
    }
    if rate.is_some() {
        for_decoder.sample_rate = rate;
    }
    let codecs = symphonia::default::get_codecs();
    codecs
        .make_audio_decoder(&for_decoder, &AudioDecoderOptions::default())
        .map_err(|e| match e {
            // No decoder for the codec at all: named.
            SymError::Unsupported(_) if codecs.get_audio_decoder(params.codec).is_none() => {
                Error::unsupported(path, unsupported_codec(params.codec, container))
            }
            e => sym_error(path, container, Some(params.codec), Stage::Setup, e),
        })
}

/// Whether `codec` is float PCM (the one whose samples can be NaN or infinite).
fn is_float_pcm(codec: AudioCodecId) -> bool {
    [
        ids::CODEC_ID_PCM_F32LE,
        ids::CODEC_ID_PCM_F32BE,
        ids::CODEC_ID_PCM_F64LE,
        ids::CODEC_ID_PCM_F64BE,
        ids::CODEC_ID_PCM_F32LE_PLANAR,
        ids::CODEC_ID_PCM_F32BE_PLANAR,
        ids::CODEC_ID_PCM_F64LE_PLANAR,
        ids::CODEC_ID_PCM_F64BE_PLANAR,
    ]
    .contains(&codec)
}

impl<'s> Stream<'s> {
    /// Opens `source`, a `container` at `offset`: its framing checked from the bytes, its
    /// reader, the first audio track, the decoder, and what the header promises.
    fn open(
        source: Box<dyn MediaSource + 's>,
        container: Container,
        offset: u64,
        path: &Path,
    ) -> Result<Self> {
        let bad = |reason: &str| Error::decode(path, reason);
        let framing = Framing::check(source, container, offset, path)?;
        let mut mss = MediaSourceStream::new(framing.source, Default::default());
        let (aiff_frames, stated) = container_notes(&mut mss, container, offset, path)?;
        mss.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::read(path, e))?;
        let format = open_reader(mss, container)
            .map_err(|e| sym_error(path, container, None, Stage::Open, e))?;
        let track = format
            .default_track(TrackType::Audio)
            .ok_or_else(|| bad("no audio track"))?;
        let params = track
            .codec_params
            .as_ref()
            .and_then(|p| p.audio())
            .ok_or_else(|| bad("no audio codec parameters"))?
            .clone();
        let rate = decoder_rate(&params, path)?;
        let promises = count_is_promise(container, framing.variable_caf);
        // The sample table's length, in its time base, for an MP4 without an edit list.
        let media = track.num_frames.map(|n| match track.time_base {
            Some(tb) => (
                n.saturating_mul(tb.numer.get() as u64),
                tb.denom.get() as u64,
            ),
            None => (n, rate.unwrap_or(0) as u64),
        });
        let trim = stated
            .trim(track.id, rate, media)
            .map_err(|reason| Error::unsupported(path, reason))?;
        let promised = aiff_frames
            .or(framing.ogg_flac_total)
            .or(track.num_frames.filter(|_| promises))
            .map(|p| trim.kept(p));
        let track_id = track.id;
        let decoder = make_decoder(&params, rate, container, path)?;
        let adpcm_block_frames = params.frames_per_block.unwrap_or(0);
        Ok(Stream {
            format,
            decoder,
            track_id,
            container,
            codec: params.codec,
            promised,
            trim,
            channels: params.channels.as_ref().map(|c| c.count()),
            rate,
            bits: params.bits_per_sample.unwrap_or(0) as u16,
            float: is_float_pcm(params.codec),
            scratch: Vec::new(),
            trimmed_end: promised.filter(|_| matches!(container, Container::Mp3 { tagged: true })),
            flac_frames: framing.flac_frames,
            next_ts: 0,
            frame_bytes: 0,
            cut: false,
            adpcm_tail: framing.adpcm.filter(|_| adpcm_block_frames > 0),
            adpcm_block_frames,
            keep: None,
            at: 0,
        })
    }

    /// The next packet of the audio track; `None` at the end (a file cut inside a packet
    /// ends there too, and the frame count says whether that is short).
    fn next(&mut self, path: &Path) -> Result<Option<Packet>> {
        self.keep = None;
        loop {
            match self.format.next_packet() {
                Ok(Some(p)) if p.track_id == self.track_id => {
                    self.check_not_past_the_promise(path, &p)?;
                    self.check_flac_continuity(path, &p)?;
                    return Ok(Some(p));
                }
                Ok(Some(_)) => continue,
                Ok(None) => return Ok(self.adpcm_tail_packet()),
                Err(SymError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    // Judged by `finish`, after the header's promise.
                    self.cut = true;
                    return Ok(None);
                }
                Err(e) => {
                    return Err(sym_error(
                        path,
                        self.container,
                        Some(self.codec),
                        Stage::Read(self.at),
                        e,
                    ));
                }
            }
        }
    }

    /// ADPCM WAV, after the reader's last packet: the partial block it dropped, padded to a
    /// whole block for the decoder (ADPCM decodes forwards, so the padding changes no frame
    /// before it), of which only its whole frames are kept (`keep`).
    fn adpcm_tail_packet(&mut self) -> Option<Packet> {
        let (data, frames) = self.adpcm_tail.take()?;
        self.keep = Some(frames);
        Some(Packet::new(
            self.track_id,
            Timestamp::new(self.at as i64),
            Duration::new(self.adpcm_block_frames),
            data,
        ))
    }

    /// Decodes `p`, into `out` when given (interleaved f32, replacing what it held), and
    /// counts its frames: (rate, channels). Float PCM is checked for NaN, infinity and the
    /// float32 range on the way, as stored.
    fn decode(
        &mut self,
        path: &Path,
        p: &Packet,
        out: Option<&mut Vec<f32>>,
    ) -> Result<(u32, usize)> {
        let (at, container, codec) = (self.at, self.container, self.codec);
        let buf = self
            .decoder
            .decode(p)
            .map_err(|e| sym_error(path, container, Some(codec), Stage::Decode(at), e))?;
        let spec = (buf.spec().rate(), buf.spec().channels().count());
        let ch = spec.1.max(1);
        let frames = self.keep.map_or(buf.frames(), |k| k.min(buf.frames()));
        if self.float {
            self.scratch.resize(buf.samples_interleaved(), 0.0);
            buf.copy_to_slice_interleaved(&mut self.scratch);
            check_float(path, &self.scratch[..frames * ch], at as usize, ch)?;
        }
        if let Some(out) = out {
            out.resize(buf.samples_interleaved(), 0.0);
            buf.copy_to_slice_interleaved(&mut out[..]);
            out.truncate(frames * ch);
        }
        self.at += frames as u64;
        Ok(spec)
    }

    /// Refuses a packet that starts a whole MPEG frame (1,152 samples, the most one holds)
    /// past a tagged MP3's promised end: its data holds more than its tag says, and
    /// symphonia would trim the rest away (ffmpeg decodes it). An inconsistent header is
    /// refused, never half-read.
    fn check_not_past_the_promise(&self, path: &Path, p: &Packet) -> Result<()> {
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
    fn check_flac_continuity(&mut self, path: &Path, p: &Packet) -> Result<()> {
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
    fn count_rest(&mut self, path: &Path, mut layout: Option<(u32, usize)>) -> Result<u64> {
        let start = self.at;
        while let Some(p) = self.next(path)? {
            let spec = self.decode(path, &p, None)?;
            check_layout(path, spec, layout)?;
            layout = Some(spec);
        }
        Ok(self.at - start)
    }
}

/// ADPCM WAV: the partial block after the last whole one ([`crate::wav::WavHeader::adpcm_tail`]),
/// read and padded with zeros to a whole block, with the whole frames it holds.
fn adpcm_tail<R: std::io::Read + Seek>(
    r: &mut R,
    h: &crate::wav::WavHeader,
) -> std::io::Result<Option<(Box<[u8]>, usize)>> {
    let Some((start, bytes, frames)) = h.adpcm_tail() else {
        return Ok(None);
    };
    let mut data = crate::sniff::read_at(r, start, bytes)?;
    if data.len() < bytes {
        return Ok(None);
    }
    data.resize(h.block_align as usize, 0);
    Ok(Some((data.into_boxed_slice(), frames)))
}

/// What an MPEG-4 AudioSpecificConfig (ISO/IEC 14496-3, 1.6.2.1) says: the audio object
/// type, the sample rate, the channel configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AudioSpecificConfig {
    object_type: u32,
    rate: Option<u32>,
    channel_config: u32,
}

impl AudioSpecificConfig {
    /// The config in `b` (an MP4 `esds` or Matroska CodecPrivate), if it parses.
    fn read(b: &[u8]) -> Option<Self> {
        let mut pos = 0usize;
        let mut bits = |n: usize| -> Option<u32> {
            let mut v = 0u32;
            for _ in 0..n {
                let byte = *b.get(pos / 8)?;
                v = (v << 1) | ((byte >> (7 - pos % 8)) & 1) as u32;
                pos += 1;
            }
            Some(v)
        };
        let object_type = match bits(5)? {
            31 => 32 + bits(6)?,
            t => t,
        };
        const RATES: [u32; 13] = [
            96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350,
        ];
        let rate = match bits(4)? {
            15 => Some(bits(24)?),
            i => RATES.get(i as usize).copied(),
        };
        let channel_config = bits(4)?;
        Some(AudioSpecificConfig {
            object_type,
            rate,
            channel_config,
        })
    }

    /// What symphonia's AAC decoder does not decode, named: it decodes AAC-LC, mono or
    /// stereo (it refused anything else as "codec id 0x1007").
    fn check(&self) -> std::result::Result<(), String> {
        aac_check(self.object_type, self.channel_config)
    }
}

/// AAC of `object_type` (MPEG-4 audio object type, 2 = LC) with channel configuration
/// `config`, if symphonia's decoder does not decode it: why, named.
fn aac_check(object_type: u32, config: u32) -> std::result::Result<(), String> {
    if object_type != 2 {
        let name = match object_type {
            1 => "AAC Main".to_string(),
            3 => "AAC SSR".to_string(),
            4 => "AAC LTP".to_string(),
            5 => "HE-AAC (SBR)".to_string(),
            29 => "HE-AAC v2 (SBR and parametric stereo)".to_string(),
            23 => "AAC-LD".to_string(),
            39 => "AAC-ELD".to_string(),
            42 => "xHE-AAC (USAC)".to_string(),
            t => format!("MPEG-4 audio object type {t}"),
        };
        return Err(format!("unsupported codec: {name} (melctl decodes AAC-LC)"));
    }
    let layout = match config {
        0 => {
            return Err("unsupported: AAC whose channel layout is in its stream (a program config element; melctl decodes mono and stereo AAC)".into());
        }
        1 | 2 => return Ok(()),
        3 => "3 channels (3.0)",
        4 => "4 channels (4.0)",
        5 => "5 channels (5.0)",
        6 => "6 channels (5.1)",
        7 => "8 channels (7.1)",
        _ => "a reserved channel configuration",
    };
    Err(format!(
        "unsupported: AAC with {layout} is not supported (melctl decodes mono and stereo AAC)"
    ))
}

/// ADTS: the first frame's profile and channel configuration, which symphonia's ADTS reader
/// does not pass on (it decoded AAC Main as if it were LC). `Err(Ok)` is an I/O error,
/// `Err(Err)` the refusal.
fn adts_profile_check<R: std::io::Read + Seek>(
    r: &mut R,
    offset: u64,
) -> std::result::Result<(), std::result::Result<std::io::Error, String>> {
    let h = crate::sniff::read_at(r, offset, 4).map_err(Ok)?;
    if h.len() < 4 {
        return Ok(());
    }
    let object_type = (h[2] >> 6) as u32 + 1;
    let config = (((h[2] & 1) << 2) | (h[3] >> 6)) as u32;
    aac_check(object_type, config).map_err(Err)
}

/// The refusal of a codec symphonia has no decoder for, named where melctl knows its name.
fn unsupported_codec(codec: AudioCodecId, container: Container) -> String {
    match codec_known_name(codec) {
        Some(name) => format!("unsupported codec: {name}"),
        None => format!(
            "unsupported codec: a codec in this {} file that melctl does not decode",
            container.name()
        ),
    }
}

/// A rate as a message shows it: bounded in length whatever the value (1e-300 is not
/// written out in 300 digits).
fn show_rate(rate: f64) -> String {
    if rate != 0.0 && !(1e-3..1e9).contains(&rate.abs()) {
        format!("{rate:e}")
    } else {
        format!("{rate}")
    }
}

/// A header's sample rate stored as a float (AIFF, CAF), checked before symphonia converts
/// it to an integer (saturating: NaN and -4096 became 0 Hz, "zero sample rate"; inf and
/// 1e300 became 4294967295 Hz): it must be a number of at least 1 Hz, within the limit,
/// and `whole` (melctl's rates are whole: taking the integer part of 4096.5 Hz would store
/// the audio at a rate it is not).
fn rate_check(path: &Path, container: &str, rate: f64, whole: bool) -> Result<()> {
    if rate.is_nan() {
        return Err(Error::decode(
            path,
            format!("malformed: the {container} header's sample rate is not a number (NaN)"),
        ));
    }
    if rate < 1.0 {
        return Err(Error::decode(
            path,
            format!(
                "malformed: the {container} header's sample rate is {} Hz (under 1 Hz)",
                show_rate(rate)
            ),
        ));
    }
    if rate > MAX_RATE as f64 {
        let shown = if rate.is_infinite() {
            format!("the {container} header's sample rate is infinite,")
        } else {
            format!("the sample rate {} Hz is", show_rate(rate))
        };
        return Err(Error::limit(
            path.display().to_string(),
            format!("{shown} above the limit of {MAX_RATE} Hz"),
        ));
    }
    if !whole {
        return Err(Error::unsupported(
            path,
            format!(
                "unsupported sample rate: {} Hz is not a whole number of hertz (taking {} Hz would shift every pitch)",
                show_rate(rate),
                rate.trunc()
            ),
        ));
    }
    Ok(())
}

/// What a CAF header says that symphonia would read wrong or refuse unclearly: a rate that
/// is no whole number of hertz within the limit, 8-bit PCM (symphonia reads 16, 24 and 32
/// bits).
fn caf_check(path: &Path, h: &crate::sniff::CafHeader) -> Result<()> {
    rate_check(path, "CAF", h.rate, h.rate.fract() == 0.0)?;
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

/// A codec's name, for messages, where melctl knows it.
fn codec_known_name(id: AudioCodecId) -> Option<&'static str> {
    let known = [
        (ids::CODEC_ID_AAC, "AAC"),
        (ids::CODEC_ID_ALAC, "ALAC"),
        (ids::CODEC_ID_FLAC, "FLAC"),
        (ids::CODEC_ID_VORBIS, "Vorbis"),
        (ids::CODEC_ID_MP3, "MP3"),
        (ids::CODEC_ID_ADPCM_MS, "MS ADPCM"),
        (ids::CODEC_ID_ADPCM_IMA_WAV, "IMA ADPCM"),
        (ids::CODEC_ID_PCM_S16LE, "PCM"),
        (ids::CODEC_ID_PCM_S16BE, "PCM"),
        (ids::CODEC_ID_PCM_S24LE, "PCM"),
        (ids::CODEC_ID_PCM_S24BE, "PCM"),
        (ids::CODEC_ID_PCM_S32LE, "PCM"),
        (ids::CODEC_ID_PCM_S32BE, "PCM"),
        (ids::CODEC_ID_PCM_S8, "PCM"),
        (ids::CODEC_ID_PCM_U8, "PCM"),
        (ids::CODEC_ID_PCM_F32LE, "float PCM"),
        (ids::CODEC_ID_PCM_F32BE, "float PCM"),
        (ids::CODEC_ID_PCM_F64LE, "float PCM"),
        (ids::CODEC_ID_PCM_F64BE, "float PCM"),
        (ids::CODEC_ID_PCM_ALAW, "A-law"),
        (ids::CODEC_ID_PCM_MULAW, "µ-law"),
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
    known.iter().find(|(k, _)| *k == id).map(|(_, n)| *n)
}

/// Decodes `source` (the file at `path`, holding `container` at `offset`) into `dst`.
pub(crate) fn decode(
    source: Box<dyn MediaSource + '_>,
    container: Container,
    offset: u64,
    path: &Path,
    audio: &AudioConfig,
    dst: Dst<'_>,
) -> Result<DecodeInfo> {
    let bad = |reason: String| Error::decode(path, reason);
    let mut s = Stream::open(source, container, offset, path)?;
    let clip = dst.clip();
    let mut rate: Option<u32> = None;
    let mut channels = 0usize;
    let mut mono: Vec<f32> = Vec::new();
    let mut interleaved: Vec<f32> = Vec::new();
    let mut limit = usize::MAX;
    let mut counted = 0u64;
    let mut stopped = false;
    while let Some(packet) = s.next(path)? {
        let (r, ch) = s.decode(path, &packet, Some(&mut interleaved))?;
        check_layout(path, (r, ch), rate.map(|x| (x, channels)))?;
        if rate.is_none() {
            check_stream(path, audio, ch, r)?;
            limit = keep_limit(clip, r, audio);
        }
        rate = Some(r);
        channels = ch;
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
        s.count_rest(path, rate.map(|r| (r, channels)))?
    } else {
        0
    };
    let frames = s.finish(path, s.trim.kept(counted.saturating_add(rest)))?;
    // Padding known only at the end (Matroska's DiscardPadding) leaves the clip here.
    mono.truncate(frames);
    let rate = rate.ok_or_else(|| bad("no audio samples".into()))?;
    dst.put(&mono, rate, audio)
        .map_err(|e| Error::limit(path.display().to_string(), e.to_string()))?;
    Ok(DecodeInfo {
        rate,
        frames,
        channels: channels as u16,
        bits: s.bits,
    })
}
