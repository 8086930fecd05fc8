//! The statistics a sink keeps of the rows it writes: every value of fixed-length clips;
//! for whole clips ([`WholeClips`]), only the frames of each block that belong to its clip
//! (the last block's frames past the clip's end are not data).

use half::slice::HalfFloatSliceExt;

use crate::plan::WholeClips;
use crate::stats::{MelStats, StatsAccumulator};
use crate::{ClipMeta, MelPlan, OutputBuf};

/// Per-mel-bin statistics over a sink's rows, given in row order.
#[derive(Debug, Clone)]
pub struct RowStats {
    /// Whole rows (every value).
    full: StatsAccumulator,
    /// Whole clips: the geometry, the rate, the frames of partial blocks (one
    /// `[n_mels, 1]` spectrogram per frame), and where the last row left off.
    whole: Option<WholeRows>,
}

#[derive(Debug, Clone)]
struct WholeRows {
    geometry: WholeClips,
    sample_rate: u32,
    n_mels: usize,
    partial: StatsAccumulator,
    /// The path of the last row, its block number within its clip, and its clip's blocks.
    last: Option<(String, u64, u64)>,
    /// The row expected next.
    next_row: usize,
    row: Vec<f32>,
    frames: Vec<f32>,
}

impl RowStats {
    /// Empty statistics for rows of `plan`.
    pub fn new(plan: &MelPlan) -> Self {
        let whole = plan.whole().map(|w| WholeRows {
            geometry: *w,
            sample_rate: plan.sample_rate(),
            n_mels: plan.n_mels(),
            partial: StatsAccumulator::new(plan.n_mels(), 1),
            last: None,
            next_row: 0,
            row: Vec::new(),
            frames: Vec::new(),
        });
        RowStats {
            full: StatsAccumulator::new(plan.n_mels(), plan.n_frames()),
            whole,
        }
    }

    /// Adds rows `first_row..` (`meta.len()` of them, values in `data`). Whole clips need
    /// their rows in order (a clip's blocks are found as a run of rows of one path);
    /// rows out of order are an error, in words.
    pub fn add(
        &mut self,
        first_row: usize,
        meta: &[ClipMeta],
        data: &OutputBuf,
    ) -> std::result::Result<(), String> {
        let Some(w) = self.whole.as_mut() else {
            self.full.add_output(data);
            return Ok(());
        };
        if first_row != w.next_row {
            return Err(format!(
                "whole clips' rows must arrive in order: row {first_row} came where row {} was due",
                w.next_row
            ));
        }
        w.next_row += meta.len();
        let (n_mels, f) = (w.n_mels, w.geometry.block_frames);
        let per = n_mels * f;
        for (r, m) in meta.iter().enumerate() {
            let samples = samples_at(m, w.sample_rate);
            let frames = w.geometry.frames(samples);
            let block = match &w.last {
                Some((p, k, _)) if *p == m.path => k + 1,
                _ => {
                    w.check_last()?;
                    0
                }
            };
            let blocks = w.geometry.blocks(frames);
            if block >= blocks {
                return Err(format!(
                    "{}: more rows than the {blocks} blocks of its clip",
                    m.path
                ));
            }
            w.last = Some((m.path.clone(), block, blocks));
            let valid = w.geometry.frames_in_block(frames, block);
            w.row.resize(per, 0.0);
            widen(data, r * per, &mut w.row);
            if valid == f {
                self.full.add_block(&w.row);
                continue;
            }
            w.frames.clear();
            for j in 0..valid {
                w.frames.extend((0..n_mels).map(|b| w.row[b * f + j]));
            }
            w.partial.add_block(&w.frames);
        }
        Ok(())
    }

    /// Checks that the last clip's blocks were all added (each earlier clip's were
    /// checked when the next began): call it before the output is committed.
    pub fn check_complete(&self) -> std::result::Result<(), String> {
        self.whole.as_ref().map_or(Ok(()), WholeRows::check_last)
    }

    /// Values seen per mel bin so far.
    pub fn count(&self) -> u64 {
        self.full.count() + self.whole.as_ref().map_or(0, |w| w.partial.count())
    }

    /// The statistics of every value (every frame of a clip) added.
    pub fn finish(&self) -> MelStats {
        let mut all = self.full.clone();
        if let Some(w) = &self.whole {
            all.merge(&w.partial);
        }
        all.finish()
    }
}

impl WholeRows {
    /// Whether the clip of the last row added has all its blocks.
    fn check_last(&self) -> std::result::Result<(), String> {
        match &self.last {
            Some((path, k, blocks)) if k + 1 != *blocks => Err(format!(
                "{path}: {} of the {blocks} blocks of its whole clip were written; the output was not committed",
                k + 1
            )),
            _ => Ok(()),
        }
    }
}

/// The samples of a row's clip at `rate`: its file's frames at its own rate, resampled
/// (`ceil(frames × rate / source rate)`, the resampler's length).
pub fn samples_at(meta: &ClipMeta, rate: u32) -> u64 {
    let s = &meta.source;
    (s.frames as u128 * rate as u128).div_ceil(s.rate.max(1) as u128) as u64
}

/// Copies row values `start..start + out.len()` of `data` into `out` as f32.
fn widen(data: &OutputBuf, start: usize, out: &mut [f32]) {
    let end = start + out.len();
    match data {
        OutputBuf::F32(v) => out.copy_from_slice(&v[start..end]),
        OutputBuf::F16(v) => v[start..end].convert_to_f32_slice(out),
        OutputBuf::Bf16(v) => v[start..end].convert_to_f32_slice(out),
    }
}
