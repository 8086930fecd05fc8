//! Whole clips (`audio.length = "whole"`): each file one clip of its own length, computed
//! and stored as rows of [`BLOCK_FRAMES`] frames.
//!
//! A clip of `N` samples has the frames of one STFT of the whole clip, as torchaudio gives
//! them: with `center`, the clip is padded by `n_fft / 2` on each side (`pad_mode`) and has
//! `1 + N / hop` frames. Block `k` is the fixed-length signal `P[k·F·hop .. k·F·hop + L]`
//! of the padded clip `P` (zeros past its end), `L = (F − 1)·hop + n_fft`, transformed
//! without centring: its `F` frames are frames `k·F .. k·F + F` of the whole clip, exactly.
//! So every backend computes whole clips with its fixed-shape plan, and every sink, the
//! journal, shards and merge store them as fixed rows. Only the last block of a clip holds
//! frames past the clip's end; readers drop them.

use crate::error::{Error, Result};
use crate::spec::{ClipLength, LogScale, MelSpec, PadMode, PadPolicy, StageSetting};

/// Frames in one stored block of a whole clip.
pub const BLOCK_FRAMES: usize = 32;

/// The geometry of whole clips: how a clip of any length becomes blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeClips {
    /// Frames per block.
    pub block_frames: usize,
    /// Samples per block (the block plan's clip), `(F − 1)·hop + n_fft`.
    pub block_samples: usize,
    /// FFT size.
    pub n_fft: usize,
    /// Frame hop.
    pub hop: usize,
    /// Whether the whole clip is centred (padded by `n_fft / 2` on each side).
    pub center: bool,
    /// How that padding is filled.
    pub pad_mode: PadMode,
    /// The longest clip kept, in samples (`audio.max_seconds`).
    pub max_samples: usize,
}

impl WholeClips {
    /// Checks what whole clips need of `spec` (segmentation off, no `top_db`, a valid
    /// `max_seconds`), and the geometry; `None` for fixed-length clips.
    pub(crate) fn of(spec: &MelSpec, max_clip_samples: usize) -> Result<Option<WholeClips>> {
        if spec.audio.length == ClipLength::Fixed {
            return Ok(None);
        }
        let off = |s: &StageSetting| s.get().is_none();
        if !off(&spec.segment.long) || !off(&spec.segment.short) {
            return Err(Error::config(
                "segment",
                "must be off (segment.long = \"off\", segment.short = \"off\") with audio.length = \"whole\": a whole clip is one spectrogram",
            ));
        }
        if let LogScale::Db {
            top_db: Some(_), ..
        } = spec.log
        {
            return Err(Error::config(
                "log.top_db",
                "is not supported with audio.length = \"whole\" (it needs each clip's peak); leave it unset",
            ));
        }
        let max_samples = max_samples(spec, max_clip_samples)?;
        let n_fft = spec.mel.n_fft;
        let hop = spec.mel.hop_length();
        Ok(Some(WholeClips {
            block_frames: BLOCK_FRAMES,
            block_samples: (BLOCK_FRAMES - 1).saturating_mul(hop).saturating_add(n_fft),
            n_fft,
            hop,
            center: spec.mel.center,
            pad_mode: spec.mel.pad_mode,
            max_samples,
        }))
    }

    /// The spec of one block: the clip is `block_samples` long and not centred.
    pub(crate) fn block_spec(&self, spec: &MelSpec) -> MelSpec {
        let mut block = spec.clone();
        block.audio.length = ClipLength::Fixed;
        block.audio.clip_seconds = self.block_samples as f64 / spec.audio.sample_rate as f64;
        block.mel.center = false;
        block
    }

    /// The shortest clip, in samples, that has a frame (reflect padding needs more
    /// samples than it pads).
    pub fn min_samples(&self) -> usize {
        match (self.center, self.pad_mode) {
            (true, PadMode::Reflect) => self.n_fft / 2 + 1,
            (true, PadMode::Constant) => 1,
            (false, _) => self.n_fft,
        }
    }

    /// Frames of a clip of `samples` samples, as torch's centred STFT gives them (0 when it
    /// is shorter than [`min_samples`](Self::min_samples)).
    pub fn frames(&self, samples: u64) -> u64 {
        if samples < self.min_samples() as u64 {
            return 0;
        }
        let hop = self.hop as u64;
        if self.center {
            // torch pads n_fft / 2 (rounded down) on each side: odd n_fft loses one.
            let pad = (self.n_fft / 2) as u64;
            1 + (samples + 2 * pad - self.n_fft as u64) / hop
        } else {
            1 + (samples - self.n_fft as u64) / hop
        }
    }

    /// Blocks holding `frames` frames.
    pub fn blocks(&self, frames: u64) -> u64 {
        frames.div_ceil(self.block_frames as u64)
    }

    /// Frames of block `k` that belong to a clip of `frames` frames.
    pub fn frames_in_block(&self, frames: u64, k: u64) -> usize {
        let f = self.block_frames as u64;
        frames.saturating_sub(k * f).min(f) as usize
    }

    /// Checks that a clip of `samples` samples can be stored whole: not longer than
    /// `audio.max_seconds`, long enough for one frame. `what` names the file.
    pub fn check_samples(&self, what: &str, samples: u64, rate: u32) -> Result<()> {
        if samples > self.max_samples as u64 {
            return Err(Error::limit(
                what,
                format!(
                    "{samples} samples at {rate} Hz, longer than audio.max_seconds ({} samples); raise it, or use audio.length = \"fixed\"",
                    self.max_samples
                ),
            ));
        }
        if samples < self.min_samples() as u64 {
            return Err(Error::limit(
                what,
                format!(
                    "{samples} samples at {rate} Hz, too short for one frame (at least {} with n_fft = {})",
                    self.min_samples(),
                    self.n_fft
                ),
            ));
        }
        Ok(())
    }

    /// Writes block `k` of `clip` (its samples at the target rate) into `dst`
    /// (`block_samples` long): the padded clip from `k·F·hop`, zeros past its end.
    pub fn fill_block(&self, clip: &[f32], k: usize, dst: &mut [f32]) {
        let n = clip.len() as isize;
        let pad = if self.center {
            (self.n_fft / 2) as isize
        } else {
            0
        };
        let start = (k * self.block_frames * self.hop) as isize - pad;
        for (j, d) in dst.iter_mut().enumerate() {
            let i = start + j as isize;
            *d = if (0..n).contains(&i) {
                clip[i as usize]
            } else if i >= n + pad || self.pad_mode == PadMode::Constant {
                0.0
            } else if i < 0 {
                // Reflect without repeating the edge: -1 → 1.
                clip.get((-i) as usize).copied().unwrap_or(0.0)
            } else {
                // Past the end, within the padding: n → n − 2.
                clip.get((2 * (n - 1) - i) as usize).copied().unwrap_or(0.0)
            };
        }
    }
}

/// The longest file in samples (`audio.max_seconds`), checked.
fn max_samples(spec: &MelSpec, limit: usize) -> Result<usize> {
    let a = &spec.audio;
    let max = a.max_seconds * a.sample_rate as f64;
    if !(a.max_seconds.is_finite() && a.max_seconds > 0.0) || max.round() > limit as f64 {
        return Err(Error::config(
            "audio.max_seconds",
            format!(
                "= {} must be a positive number of seconds giving at most {limit} samples at {} Hz",
                a.max_seconds, a.sample_rate
            ),
        ));
    }
    Ok((max.round() as usize).max(1))
}

/// Long recordings as windows (`audio.windows`): each file cut into clips of `window`
/// samples every `hop`, the last one (when audio is left past the last whole window)
/// partial and placed per `audio.pad`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windowing {
    /// Samples per window (the plan's clip).
    pub window: usize,
    /// Samples between window starts.
    pub hop: usize,
    /// Where a partial window's zeros go.
    pub pad: PadPolicy,
    /// The longest file kept, in samples (`audio.max_seconds`).
    pub max_samples: usize,
}

impl Windowing {
    /// Checks `audio.windows` (with fixed-length clips, a positive window and hop, a valid
    /// `max_seconds`); `None` without windows.
    pub(crate) fn of(spec: &MelSpec, limit: usize) -> Result<Option<Windowing>> {
        let Some(w) = spec.audio.windows else {
            return Ok(None);
        };
        if spec.audio.length != ClipLength::Fixed {
            return Err(Error::config(
                "audio.windows",
                "cuts files into fixed-length clips: it needs audio.length = \"fixed\" (drop one of them)",
            ));
        }
        let rate = spec.audio.sample_rate as f64;
        let samples = |field: &str, s: f64| -> Result<usize> {
            let n = (s * rate).round();
            if !(s.is_finite() && s > 0.0) || n < 1.0 || n > limit as f64 {
                return Err(Error::config(
                    field,
                    format!(
                        "= {s} must be a positive number of seconds giving 1 to {limit} samples at {rate} Hz"
                    ),
                ));
            }
            Ok(n as usize)
        };
        Ok(Some(Windowing {
            window: samples("audio.windows.seconds", w.seconds)?,
            hop: samples("audio.windows.hop_seconds", w.hop_seconds)?,
            pad: spec.audio.pad,
            max_samples: max_samples(spec, limit)?,
        }))
    }

    /// The spec of one window: a fixed clip of `seconds`.
    pub(crate) fn window_spec(&self, spec: &MelSpec) -> MelSpec {
        let mut one = spec.clone();
        one.audio.windows = None;
        one.audio.clip_seconds = self.window as f64 / spec.audio.sample_rate as f64;
        one
    }

    /// Windows of a file of `samples` samples: one for a file no longer than a window,
    /// else every whole window and a last partial one when audio is left after them and
    /// the next start is inside the file (with a hop longer than the window, audio left
    /// in a gap makes no window of padding alone).
    pub fn count(&self, samples: u64) -> u64 {
        let (w, h) = (self.window as u64, self.hop as u64);
        if samples <= w {
            return 1;
        }
        let whole = 1 + (samples - w) / h;
        let covered = (whole - 1) * h + w;
        whole + u64::from(covered < samples && whole * h < samples)
    }

    /// Writes window `k` of `clip` into `dst` (`window` long), a partial one placed per `pad`.
    pub fn fill(&self, clip: &[f32], k: usize, dst: &mut [f32]) {
        let start = (k * self.hop).min(clip.len());
        let kept = &clip[start..(start + self.window).min(clip.len())];
        let before = match self.pad {
            PadPolicy::End => 0,
            PadPolicy::Both => (self.window - kept.len()) / 2,
        };
        dst.fill(0.0);
        dst[before..before + kept.len()].copy_from_slice(kept);
    }
}

/// How a file becomes rows when it is read whole: blocks of a whole clip, or windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cutting {
    /// `audio.length = "whole"`.
    Blocks(WholeClips),
    /// `audio.windows`.
    Windows(Windowing),
}

impl Cutting {
    /// The configuration field that asks for this cutting (for messages).
    pub fn field(&self) -> &'static str {
        match self {
            Cutting::Blocks(_) => "audio.length = \"whole\"",
            Cutting::Windows(_) => "audio.windows",
        }
    }

    /// Rows of a file of `samples` samples (0: it has no frame).
    pub fn rows(&self, samples: u64) -> u64 {
        match self {
            Cutting::Blocks(w) => w.blocks(w.frames(samples)),
            Cutting::Windows(w) => w.count(samples),
        }
    }

    /// Samples per row.
    pub fn row_samples(&self) -> usize {
        match self {
            Cutting::Blocks(w) => w.block_samples,
            Cutting::Windows(w) => w.window,
        }
    }

    /// The longest file kept, in samples.
    pub fn max_samples(&self) -> usize {
        match self {
            Cutting::Blocks(w) => w.max_samples,
            Cutting::Windows(w) => w.max_samples,
        }
    }

    /// Checks a file of `samples` samples can be cut (not too long; whole clips: not
    /// too short for a frame). `what` names the file.
    pub fn check_samples(&self, what: &str, samples: u64, rate: u32) -> Result<()> {
        match self {
            Cutting::Blocks(w) => w.check_samples(what, samples, rate),
            Cutting::Windows(w) if samples > w.max_samples as u64 => Err(Error::limit(
                what,
                format!(
                    "{samples} samples at {rate} Hz, longer than audio.max_seconds ({} samples); raise it",
                    w.max_samples
                ),
            )),
            Cutting::Windows(_) => Ok(()),
        }
    }

    /// Writes row `k` of `clip` into `dst` (`row_samples` long).
    pub fn fill(&self, clip: &[f32], k: usize, dst: &mut [f32]) {
        match self {
            Cutting::Blocks(w) => w.fill_block(clip, k, dst),
            Cutting::Windows(w) => w.fill(clip, k, dst),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::MelPlan;
    use crate::spec::MelSpec;

    fn whole_spec() -> MelSpec {
        let mut spec = crate::config::Config::default().spec();
        spec.audio.length = ClipLength::Whole;
        spec.segment.long = StageSetting::OFF;
        spec.segment.short = StageSetting::OFF;
        spec
    }

    /// The blocks of a clip, computed by the block plan and concatenated, are the frames of
    /// one centred STFT of the whole clip (the reference, in f64).
    #[test]
    fn blocks_concatenated_are_the_whole_clips_frames() {
        for (samples, pad_mode, n_fft) in [
            (300usize, PadMode::Reflect, 512),
            (4096 * 3 + 77, PadMode::Reflect, 512),
            (9000, PadMode::Constant, 512),
            // Odd n_fft, a clip a whole number of hops long: one frame fewer.
            (128 * 40, PadMode::Reflect, 401),
        ] {
            let mut spec = whole_spec();
            spec.mel.pad_mode = pad_mode;
            spec.mel.n_fft = n_fft;
            spec.mel.win_length = Some(n_fft);
            let plan = MelPlan::new(&spec).unwrap();
            let w = plan.whole().unwrap();
            let clip: Vec<f32> = (0..samples)
                .map(|i| (i as f32 * 0.37).sin() * 0.5 + (i as f32 * 0.011).cos() * 0.3)
                .collect();
            let frames = w.frames(samples as u64) as usize;
            let blocks = w.blocks(frames as u64) as usize;
            let mut rows = vec![0.0f32; blocks * w.block_samples];
            for (k, row) in rows.chunks_mut(w.block_samples).enumerate() {
                w.fill_block(&clip, k, row);
            }
            let got: Vec<f64> = rows
                .chunks(w.block_samples)
                .flat_map(|r| {
                    let r: Vec<f64> = r.iter().map(|&x| x as f64).collect();
                    crate::reference::clip_mel(&plan, &r)
                })
                .collect();
            let mut whole = spec.clone();
            whole.audio.length = ClipLength::Fixed;
            whole.audio.clip_seconds = samples as f64 / spec.audio.sample_rate as f64;
            let one = MelPlan::new(&whole).unwrap();
            assert_eq!(one.n_frames(), frames, "{samples}");
            let clip64: Vec<f64> = clip.iter().map(|&x| x as f64).collect();
            let want = crate::reference::clip_mel(&one, &clip64);
            let (m, f) = (plan.n_mels(), w.block_frames);
            for t in 0..frames {
                let (k, j) = (t / f, t % f);
                for b in 0..m {
                    let g = got[k * m * f + b * f + j];
                    let e = want[b * frames + t];
                    assert!(
                        (g - e).abs() < 1e-9,
                        "{samples} frame {t} mel {b}: {g} vs {e}"
                    );
                }
            }
        }
    }

    #[test]
    fn whole_clips_refuse_segments_top_db_and_bad_bounds() {
        let mut spec = whole_spec();
        spec.segment.short = crate::config::Config::default().spec().segment.short;
        let e = MelPlan::new(&spec).unwrap_err().to_string();
        assert!(e.contains("segment") && e.contains("whole"), "{e}");
        let mut spec = whole_spec();
        spec.log = LogScale::Db {
            amin: 1e-10,
            top_db: Some(80.0),
        };
        let e = MelPlan::new(&spec).unwrap_err().to_string();
        assert!(e.contains("log.top_db"), "{e}");
        for bad in [0.0, -1.0, f64::NAN, 1e12] {
            let mut spec = whole_spec();
            spec.audio.max_seconds = bad;
            let e = MelPlan::new(&spec).unwrap_err().to_string();
            assert!(e.contains("audio.max_seconds"), "{bad}: {e}");
        }
    }

    #[test]
    fn windows_cover_the_file_and_place_the_last_per_pad() {
        let w = Windowing {
            window: 4,
            hop: 3,
            pad: PadPolicy::End,
            max_samples: 100,
        };
        assert_eq!(
            [w.count(1), w.count(4), w.count(5), w.count(7), w.count(8)],
            [1, 1, 2, 2, 3]
        );
        // A hop longer than the window: no window starts at or past the end.
        let gaps = Windowing { hop: 10, ..w };
        assert_eq!(
            [
                gaps.count(9),
                gaps.count(10),
                gaps.count(11),
                gaps.count(14)
            ],
            [1, 1, 2, 2]
        );
        let clip: Vec<f32> = (1..=8).map(|x| x as f32).collect();
        let mut dst = [9.0f32; 4];
        w.fill(&clip, 2, &mut dst);
        assert_eq!(dst, [7.0, 8.0, 0.0, 0.0]);
        let both = Windowing {
            pad: PadPolicy::Both,
            ..w
        };
        both.fill(&clip, 2, &mut dst);
        assert_eq!(dst, [0.0, 7.0, 8.0, 0.0]);
        both.fill(&clip[..2], 0, &mut dst);
        assert_eq!(dst, [0.0, 1.0, 2.0, 0.0]);
        let mut spec = crate::config::Config::default().spec();
        spec.audio.windows = Some(crate::spec::Windows {
            seconds: 2.0,
            hop_seconds: 0.0,
        });
        let e = MelPlan::new(&spec).unwrap_err().to_string();
        assert!(e.contains("audio.windows.hop_seconds"), "{e}");
        spec.audio.windows = Some(crate::spec::Windows {
            seconds: 2.0,
            hop_seconds: 1.0,
        });
        let plan = MelPlan::new(&spec).unwrap();
        assert_eq!(plan.clip_samples(), 8192);
        assert!(matches!(plan.cutting(), Some(Cutting::Windows(w)) if w.hop == 4096));
        spec.audio.length = ClipLength::Whole;
        let e = MelPlan::new(&spec).unwrap_err().to_string();
        assert!(e.contains("audio.windows"), "{e}");
    }

    #[test]
    fn frame_and_block_counts_follow_torchaudio() {
        let plan = MelPlan::new(&whole_spec()).unwrap();
        let w = plan.whole().unwrap();
        // n_fft 512, hop 128, centred, reflect: 1 + N / 128 frames, N > 256.
        assert_eq!(w.frames(256), 0);
        assert_eq!(w.frames(257), 3);
        assert_eq!(w.frames(4096), 33);
        assert_eq!(w.blocks(33), 2);
        assert_eq!(w.frames_in_block(33, 1), 1);
        assert!(w.check_samples("a.wav", 100, 4096).is_err());
        let e = w
            .check_samples("a.wav", 4096 * 601, 4096)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a.wav") && e.contains("audio.max_seconds"),
            "{e}"
        );
    }
}
