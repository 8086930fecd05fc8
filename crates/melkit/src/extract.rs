//! In-process extraction: audio in, the spectrogram `melctl build` would store for it
//! out, in the same layout, dtype and values. A field device computes exactly its
//! model's training features this way (no train/serve skew).

use std::path::Path;

use mel_core::plan::Cutting;
use mel_core::{Error, MelBackend, MelPlan, MelSpec, OutputBuf, OutputSlice, Result};
use ndarray::ArrayD;

use crate::backend::{BackendChoice, BackendRequest, choose};

/// Spectrograms in the dataset's layout: `[clips, long?, short?, n_mels, frames]`, in the
/// plan's dtype (the values `melctl build` stores).
#[derive(Debug, Clone, PartialEq)]
pub struct Features {
    values: OutputBuf,
    shape: Vec<usize>,
}

impl Features {
    /// `[clips, ...clip shape]`.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Clips held.
    pub fn clips(&self) -> usize {
        self.shape[0]
    }

    /// The values as stored (f32, f16 or bf16).
    pub fn values(&self) -> &OutputBuf {
        &self.values
    }

    /// The values widened to f32 (exact for every stored dtype), as an array of
    /// [`shape`](Self::shape).
    pub fn to_f32(&self) -> ArrayD<f32> {
        let v: Vec<f32> = (0..self.values.len())
            .map(|i| self.values.get_f64(i) as f32)
            .collect();
        ArrayD::from_shape_vec(self.shape.clone(), v).expect("values match the shape")
    }

    /// Clip `i` widened to f32, as an array of the clip shape (`[79, 3, 32, 5]` for
    /// leak-4k, `[80, 101]` for speech-16k).
    pub fn clip_f32(&self, i: usize) -> ArrayD<f32> {
        let per: usize = self.shape[1..].iter().product();
        let v: Vec<f32> = (i * per..(i + 1) * per)
            .map(|k| self.values.get_f64(k) as f32)
            .collect();
        ArrayD::from_shape_vec(self.shape[1..].to_vec(), v).expect("values match the shape")
    }
}

/// The zeroed output of `count` clips of `per` values, or a limit error naming its size
/// where it cannot be allocated.
fn output(dtype: mel_core::Dtype, count: usize, per: usize) -> Result<OutputBuf> {
    let too_big = || {
        Error::limit(
            "the extracted features",
            format!(
                "{count} clips × {per} values of {} cannot be allocated",
                dtype.name()
            ),
        )
    };
    let len = count.checked_mul(per).ok_or_else(too_big)?;
    OutputBuf::try_zeros(dtype, len).ok_or_else(too_big)
}

/// Rows [`Extractor::rows`] fits and computes at once.
pub const ROWS_AT_ONCE: usize = 64;

/// `clip K` (numbered within a part starting at row `first`) as `row first+K`.
fn renumber(path: &std::path::Path, first: usize) -> std::path::PathBuf {
    let s = path.to_string_lossy();
    match s
        .strip_prefix("clip ")
        .and_then(|k| k.parse::<usize>().ok())
    {
        Some(k) => format!("row {}", first + k).into(),
        None => path.to_path_buf(),
    }
}

/// Computes spectrograms with one backend, reused across calls.
pub struct Extractor {
    plan: MelPlan,
    backend: Box<dyn MelBackend>,
    choice: BackendChoice,
    row: Vec<f32>,
}

impl Extractor {
    /// Validates `spec`, plans it, and starts the backend `request` asks for. With whole
    /// clips (`audio.length = "whole"`) a file or array gives one spectrogram of its own
    /// length, `[1, n_mels, frames]`; with `audio.windows`, `[windows, ...window shape]`:
    /// what a build stores for that file, computed as the build computes it.
    pub fn new(spec: &MelSpec, request: &BackendRequest) -> Result<Self> {
        let plan = MelPlan::new(spec)?;
        let chosen = choose(&plan, request)?;
        Ok(Extractor {
            row: vec![0.0; plan.clip_samples()],
            plan,
            backend: chosen.backend,
            choice: chosen.choice,
        })
    }

    /// The plan (shapes, rates).
    pub fn plan(&self) -> &MelPlan {
        &self.plan
    }

    /// Which backend runs, on what, and why.
    pub fn choice(&self) -> &BackendChoice {
        &self.choice
    }

    /// The spectrogram of the audio file at `path`, decoded exactly as `melctl build`
    /// decodes it (any supported format; downmixed, resampled, padded or trimmed per the
    /// spec's audio settings). One clip.
    pub fn file(&mut self, path: &Path) -> Result<Features> {
        let spec = self.plan.spec().audio.clone();
        if let Some(cutting) = self.plan.cutting() {
            let mut clip = Vec::new();
            mel_audio::decode_whole(path, &spec, cutting.max_samples(), &mut clip)?;
            return self.cut(cutting, &clip, &path.display().to_string());
        }
        mel_audio::decode_into(path, &spec, &mut self.row)?;
        let row = std::mem::take(&mut self.row);
        let out = self.clips(&row);
        self.row = row;
        out
    }

    /// The spectrogram of mono samples at `sample_rate` Hz (in [-1, 1]), brought to the
    /// clip the way a decoded file is (resampled, padded or trimmed). One clip.
    pub fn samples(&mut self, samples: &[f32], sample_rate: u32) -> Result<Features> {
        let audio = self.plan.spec().audio.clone();
        if let Some(cutting) = self.plan.cutting() {
            // The length at the plan's rate is checked before resampling allocates it.
            let at_rate = (samples.len() as u128 * audio.sample_rate as u128)
                .div_ceil(u128::from(sample_rate.max(1)));
            cutting.check_samples(
                "samples",
                u64::try_from(at_rate).unwrap_or(u64::MAX),
                audio.sample_rate,
            )?;
            let clip = if sample_rate == audio.sample_rate {
                samples.to_vec()
            } else {
                mel_audio::resample::resample(
                    samples,
                    sample_rate,
                    audio.sample_rate,
                    audio.resample_quality,
                )
                .map_err(|e| Error::unsupported("samples", e.to_string()))?
            };
            return self.cut(cutting, &clip, "samples");
        }
        let mut row = std::mem::take(&mut self.row);
        let fitted = mel_audio::fit_clip(samples, sample_rate, &audio, &mut row)
            .map_err(|e| Error::unsupported("samples", e.to_string()));
        let out = fitted.and_then(|()| self.clips(&row));
        self.row = row;
        out
    }

    /// Spectrograms of `samples.len() / row_len` clips of mono samples at `sample_rate`
    /// Hz, `row_len` samples each, back to back: each row brought to the clip as
    /// [`samples`](Self::samples) brings one. Rows are fitted and computed
    /// [`ROWS_AT_ONCE`] at a time, so the working memory beside the output stays bounded
    /// whatever the row length.
    pub fn rows(&mut self, samples: &[f32], row_len: usize, sample_rate: u32) -> Result<Features> {
        self.rows_until(samples, row_len, sample_rate, &mut || false)
    }

    /// [`rows`](Self::rows), asking `stop` before each part of [`ROWS_AT_ONCE`] rows:
    /// when it answers true the call ends with [`Error::Cancelled`] (a caller stays
    /// responsive to Ctrl-C during a long call).
    pub fn rows_until(
        &mut self,
        samples: &[f32],
        row_len: usize,
        sample_rate: u32,
        stop: &mut dyn FnMut() -> bool,
    ) -> Result<Features> {
        if let Some(cutting) = self.plan.cutting() {
            if samples.len() == row_len {
                return self.samples(samples, sample_rate);
            }
            return Err(Error::Shape(format!(
                "{} rows of audio: with {} each clip has its own number of frames; extract one at a time",
                samples.len().checked_div(row_len).unwrap_or(0),
                cutting.field()
            )));
        }
        if row_len == 0 || samples.is_empty() || !samples.len().is_multiple_of(row_len) {
            return Err(Error::Shape(format!(
                "{} samples is not a whole, non-zero number of {row_len}-sample rows",
                samples.len()
            )));
        }
        let (n, per) = (self.plan.clip_samples(), self.plan.values_per_clip());
        let audio = self.plan.spec().audio.clone();
        let count = samples.len() / row_len;
        let mut values = output(self.plan.dtype(), count, per)?;
        let mut fitted = vec![0.0f32; count.min(ROWS_AT_ONCE) * n];
        for (c, chunk) in samples.chunks(row_len * ROWS_AT_ONCE).enumerate() {
            if stop() {
                return Err(Error::Cancelled);
            }
            let first = c * ROWS_AT_ONCE;
            let m = chunk.len() / row_len;
            for (k, (row, dst)) in chunk
                .chunks_exact(row_len)
                .zip(fitted.chunks_exact_mut(n))
                .enumerate()
            {
                mel_audio::fit_clip(row, sample_rate, &audio, dst)
                    .map_err(|e| Error::unsupported(format!("row {}", first + k), e.to_string()))?;
            }
            let part = self.clips(&fitted[..m * n]).map_err(|e| match e {
                Error::Unsupported { path, what } => Error::Unsupported {
                    path: renumber(&path, first),
                    what,
                },
                e => e,
            })?;
            let range = first * per..(first + m) * per;
            match (values.slice_mut(range), part.values) {
                (OutputSlice::F32(d), OutputBuf::F32(v)) => d.copy_from_slice(&v),
                (OutputSlice::F16(d), OutputBuf::F16(v)) => d.copy_from_slice(&v),
                (OutputSlice::Bf16(d), OutputBuf::Bf16(v)) => d.copy_from_slice(&v),
                _ => unreachable!("one plan, one dtype"),
            }
        }
        let mut shape = vec![count];
        shape.extend(self.plan.clip_shape());
        Ok(Features { values, shape })
    }

    /// What a build stores for `clip` (its samples at the plan's rate; `what` names it):
    /// its rows (blocks or windows) computed as fixed clips, then blocks joined into one
    /// spectrogram of the clip's frames, or windows kept one per row.
    fn cut(&mut self, cutting: Cutting, clip: &[f32], what: &str) -> Result<Features> {
        let rate = self.plan.spec().audio.sample_rate;
        cutting.check_samples(what, clip.len() as u64, rate)?;
        let rows = usize::try_from(cutting.rows(clip.len() as u64))
            .map_err(|_| Error::limit(what, "too many rows"))?;
        let n = cutting.row_samples();
        let mut fitted = Vec::new();
        fitted
            .try_reserve_exact(rows.saturating_mul(n))
            .map_err(|_| Error::limit(what, format!("{rows} rows of {n} samples")))?;
        fitted.resize(rows * n, 0.0);
        for (k, dst) in fitted.chunks_exact_mut(n).enumerate() {
            cutting.fill(clip, k, dst);
        }
        let computed = self.clips(&fitted)?;
        let Cutting::Blocks(whole) = cutting else {
            return Ok(computed);
        };
        // Blocks `[rows, n_mels, F]` → `[1, n_mels, frames]`: frame `k·F + j` of bin `b` is
        // block `k`'s `[b, j]`.
        let frames = whole.frames(clip.len() as u64) as usize;
        let f = whole.block_frames;
        let n_mels = self.plan.clip_shape()[0];
        let mut values = output(self.plan.dtype(), 1, n_mels * frames)?;
        let src = computed.values();
        let mut dst = values.as_mut_slice();
        for b in 0..n_mels {
            for t in 0..frames {
                let (k, j) = (t / f, t % f);
                let from = (k * n_mels + b) * f + j;
                let to = b * frames + t;
                match (&mut dst, src) {
                    (OutputSlice::F32(d), OutputBuf::F32(v)) => d[to] = v[from],
                    (OutputSlice::F16(d), OutputBuf::F16(v)) => d[to] = v[from],
                    (OutputSlice::Bf16(d), OutputBuf::Bf16(v)) => d[to] = v[from],
                    _ => unreachable!("one plan, one dtype"),
                }
            }
        }
        Ok(Features {
            values,
            shape: vec![1, n_mels, frames],
        })
    }

    /// Spectrograms of clips already at the plan's rate and length, `[clips, clip_samples]`
    /// back to back.
    pub fn clips(&mut self, clips: &[f32]) -> Result<Features> {
        let n = self.plan.clip_samples();
        if clips.is_empty() || !clips.len().is_multiple_of(n) {
            return Err(Error::Shape(format!(
                "{} samples is not a whole, non-zero number of {n}-sample clips",
                clips.len()
            )));
        }
        let count = clips.len() / n;
        let mut values = output(self.plan.dtype(), count, self.plan.values_per_clip())?;
        self.backend.compute(clips, values.as_mut_slice())?;
        // The same check a build makes before it stores a clip: no train/serve skew in
        // what counts as a valid spectrogram either.
        for k in 0..count {
            if let Some(why) = mel_core::pipeline::finite::check_clip(&self.plan, clips, &values, k)
            {
                return Err(Error::unsupported(format!("clip {k}"), why));
            }
        }
        let mut shape = vec![count];
        shape.extend(self.plan.clip_shape());
        Ok(Features { values, shape })
    }
}
