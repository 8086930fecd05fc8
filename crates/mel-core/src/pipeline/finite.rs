//! The one check between the backend and the sink, whatever the backend: a clip whose
//! samples are not finite or beyond what the plan's f32 arithmetic takes
//! ([`MelPlan::sample_limit`]), or whose stored spectrogram holds a value that is not
//! finite, is named, never written, never averaged into the statistics.
//!
//! Both checks run on every value of every clip, so they are branch-free passes the
//! compiler vectorises: the samples' magnitudes against the limit (a NaN fails the
//! comparison), from the load stage's thread, and the stored values' exponent bits against
//! all-ones, from the write stage's, so a fast device's mel stage does not wait for them
//! (about 17 µs and 13 µs per leak-4k clip on one core, against 1.1 ms for the CPU
//! transform and 1.3 µs for the CUDA kernel). Each runs a batch's clips in parallel on
//! the run's check pool ([`super::CheckPool`]): serial, they and the statistics kept one write thread busy for a whole
//! H100 build (BENCHMARKS.md).

use half::{bf16, f16};
use rayon::prelude::*;

use crate::buffer::OutputBuf;
use crate::error::{FailureKind, Result};
use crate::plan::MelPlan;
use crate::traits::{ClipFailure, ClipMeta};

/// Values folded per step of a check (one vector's worth, several times over).
const STEP: usize = 64;

/// Why clip `k` of a batch cannot be stored, or `None` when it can: `samples` holds the
/// batch's clips, `out` their stored values.
pub fn check_clip(plan: &MelPlan, samples: &[f32], out: &OutputBuf, k: usize) -> Option<String> {
    let n = plan.clip_samples();
    check_samples(plan, &samples[k * n..(k + 1) * n]).or_else(|| {
        let per = plan.values_per_clip();
        check_values(plan, out, k * per..(k + 1) * per)
    })
}

/// Why `clip` (one clip's samples) cannot be computed, or `None` when every sample is
/// finite and within the plan's sample limit.
pub fn check_samples(plan: &MelPlan, clip: &[f32]) -> Option<String> {
    let limit = plan.sample_limit();
    let within = |c: &[f32]| c.iter().fold(true, |ok, &x| ok & (x.abs() <= limit));
    let mut chunks = clip.chunks_exact(STEP);
    let ok = chunks.by_ref().fold(true, |ok, c| ok & within(c)) & within(chunks.remainder());
    if ok {
        return None;
    }
    let (i, &x) = clip
        .iter()
        .enumerate()
        .find(|(_, x)| x.is_nan() || x.abs() > limit)
        .expect("a sample failed the check");
    let what = if x.is_finite() {
        format!(
            "is {x:e}, beyond the {limit:.2e} this configuration computes in f32 without overflow (full scale is 1)"
        )
    } else {
        format!("is {x}, not a finite number")
    };
    Some(format!(
        "non-finite spectrogram: decoded sample {i} of the clip {what}"
    ))
}

/// Why values `range` of `out` (one clip's stored values) cannot be stored, or `None`
/// when every one is finite.
pub fn check_values(
    plan: &MelPlan,
    out: &OutputBuf,
    range: std::ops::Range<usize>,
) -> Option<String> {
    let bad = match out {
        OutputBuf::F32(v) => first_bad(&v[range.clone()], |x: &f32| x.to_bits(), 0x7f80_0000),
        OutputBuf::F16(v) => first_bad(&v[range.clone()], |x: &f16| x.to_bits() as u32, 0x7c00),
        OutputBuf::Bf16(v) => first_bad(&v[range.clone()], |x: &bf16| x.to_bits() as u32, 0x7f80),
    }?;
    let value = out.get_f64(range.start + bad);
    let per_segment = plan.values_per_segment();
    let (segment, at) = (bad / per_segment, bad % per_segment);
    let (mel, frame) = (at / plan.n_frames(), at % plan.n_frames());
    let cause = if value.is_nan() {
        String::new()
    } else {
        format!(
            "; the input is louder than {} holds{}",
            plan.dtype().name(),
            if plan.spec().log == crate::LogScale::None {
                " without a log"
            } else {
                ""
            }
        )
    };
    Some(format!(
        "non-finite spectrogram: value {value} at segment {segment}, mel {mel}, frame {frame} in {}{cause}",
        plan.dtype().name()
    ))
}

/// The index of the first value whose exponent bits (`mask`) are all ones (an infinity
/// or a NaN), found by a branch-free pass first.
fn first_bad<T>(values: &[T], bits: impl Fn(&T) -> u32 + Copy, mask: u32) -> Option<usize> {
    let bad = |c: &[T]| c.iter().fold(false, |b, x| b | (bits(x) & mask == mask));
    let mut chunks = values.chunks_exact(STEP);
    let any = chunks.by_ref().fold(false, |b, c| b | bad(c)) | bad(chunks.remainder());
    if !any {
        return None;
    }
    values.iter().position(|x| bits(x) & mask == mask)
}

/// Clips of a batch the load stage found not computable: (position in the batch, why).
pub(super) type Rejected = Vec<(usize, String)>;

/// The samples check of a whole batch of clips, `samples` holding them back to back,
/// clips in parallel (on the current rayon pool).
pub(super) fn reject_samples(plan: &MelPlan, samples: &[f32]) -> Rejected {
    samples
        .par_chunks_exact(plan.clip_samples())
        .enumerate()
        .filter_map(|(k, clip)| check_samples(plan, clip).map(|why| (k, why)))
        .collect()
}

/// The write stage's side of the check: takes the failing clips out of each batch, in
/// order, and moves the rows after them up.
pub(super) struct Screen<'a> {
    plan: &'a MelPlan,
    stop_on_failure: bool,
    /// The clips taken out so far, in file order.
    pub failures: Vec<ClipFailure>,
}

impl<'a> Screen<'a> {
    /// Nothing taken out yet.
    pub fn new(plan: &'a MelPlan, stop_on_failure: bool) -> Self {
        Screen {
            plan,
            stop_on_failure,
            failures: Vec::new(),
        }
    }

    /// Takes out of a batch (`indices`: the run's clip indices; `metas` and `data`) the
    /// clips `rejected` names and those whose values are not finite, and returns the
    /// batch's first row once the clips taken out before it are discounted. With
    /// `stop_on_failure`, the first one is the error.
    pub fn apply(
        &mut self,
        row: usize,
        indices: &[usize],
        metas: &mut Vec<ClipMeta>,
        data: &mut OutputBuf,
        rejected: Rejected,
    ) -> Result<usize> {
        let row = row - self.failures.len();
        let per = self.plan.values_per_clip();
        let mut bad = rejected;
        let checked: Rejected = (0..metas.len())
            .into_par_iter()
            .filter(|k| !bad.iter().any(|b| b.0 == *k))
            .filter_map(|k| {
                check_values(self.plan, data, k * per..(k + 1) * per).map(|why| (k, why))
            })
            .collect();
        bad.extend(checked);
        if bad.is_empty() {
            return Ok(row);
        }
        bad.sort_by_key(|b| b.0);
        let mut keep = vec![true; metas.len()];
        for (k, reason) in bad {
            keep[k] = false;
            let failure = ClipFailure {
                index: indices[k],
                path: metas[k].path.clone().into(),
                kind: FailureKind::NonFinite,
                reason,
            };
            if self.stop_on_failure {
                return Err(failure.to_error());
            }
            self.failures.push(failure);
        }
        data.retain_clips(per, &keep);
        let mut flags = keep.iter();
        metas.retain(|_| *flags.next().expect("one flag per clip"));
        Ok(row)
    }

    /// Rows written of `rows` clips computed.
    pub fn rows(&self, rows: usize) -> usize {
        rows - self.failures.len()
    }
}
