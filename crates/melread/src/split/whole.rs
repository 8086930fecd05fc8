//! Whole clips in a split (`audio.length = "whole"`): `mel` holds rows of
//! [`BLOCK_FRAMES`](mel_core::plan::BLOCK_FRAMES) frames, each clip a run of rows of one
//! path. The index of clips is derived at open from what every row carries (its path and
//! its source's rate and frame count, which give the clip's length), and checked: a run
//! that is not exactly the blocks its length needs refuses the file.

use std::ops::Range;

use mel_core::plan::WholeClips;
use mel_core::{Error, Result};
use ndarray::Array2;

use super::Split;
use super::reader::Reader;
use crate::convert::{self, Affine, OutSlice};
use crate::limits::bad;

/// Where each whole clip of a split lies: its rows and its frames.
#[derive(Debug, Clone, PartialEq)]
pub struct WholeIndex {
    geometry: WholeClips,
    /// The first row of each clip, then the row count (clips + 1 entries).
    starts: Vec<usize>,
    /// Frames of each clip.
    frames: Vec<usize>,
}

impl WholeIndex {
    /// The index of `split`'s rows, stored with `geometry` at `sample_rate`.
    pub(super) fn build(split: &Split, geometry: WholeClips, sample_rate: u32) -> Result<Self> {
        let p = &split.provenance;
        let (Some(rates), Some(lengths)) = (&p.source_rate, &p.source_frames) else {
            return Err(bad(
                &split.path,
                "holds whole clips but not each row's source rate and frame count, which give each clip's length",
            ));
        };
        let rows = split.clips();
        let (mut starts, mut frames) = (vec![0], Vec::new());
        let mut r = 0;
        while r < rows {
            let samples = (lengths[r] as u128 * sample_rate as u128)
                .div_ceil(rates[r].max(1) as u128)
                .min(u64::MAX as u128) as u64;
            let t = geometry.frames(samples);
            let blocks = geometry.blocks(t);
            let end = (r as u64).saturating_add(blocks);
            let same = |q: usize| {
                split.paths[q] == split.paths[r]
                    && rates[q] == rates[r]
                    && lengths[q] == lengths[r]
                    && split.labels[q] == split.labels[r]
            };
            if t == 0 || end > rows as u64 || !(r..end as usize).all(same) {
                return Err(bad(
                    &split.path,
                    format!(
                        "row {r} ({}) begins a whole clip of {t} frames, which the {blocks} rows from it do not hold",
                        split.paths[r]
                    ),
                ));
            }
            frames.push(t as usize);
            r = end as usize;
            starts.push(r);
        }
        Ok(WholeIndex {
            geometry,
            starts,
            frames,
        })
    }

    /// Clips in the split.
    pub fn clips(&self) -> usize {
        self.frames.len()
    }

    /// Frames of clip `clip`.
    pub fn frames(&self, clip: usize) -> usize {
        self.frames[clip]
    }

    /// Frames of every clip.
    pub fn all_frames(&self) -> &[usize] {
        &self.frames
    }

    /// The rows (blocks) of clip `clip`.
    pub fn rows(&self, clip: usize) -> Range<usize> {
        self.starts[clip]..self.starts[clip + 1]
    }

    /// The first row of each clip (its label, path, metadata and source are every row's).
    pub fn first_rows(&self) -> &[usize] {
        &self.starts[..self.frames.len()]
    }

    /// Frames per row.
    pub fn block_frames(&self) -> usize {
        self.geometry.block_frames
    }

    /// How clips were cut into blocks.
    pub fn geometry(&self) -> &WholeClips {
        &self.geometry
    }

    /// Refuses a clip index beyond the split.
    pub(crate) fn check_clip(&self, clip: usize) -> Result<()> {
        if clip >= self.clips() {
            return Err(Error::Shape(format!(
                "clip {clip} is beyond the split's {} whole clips",
                self.clips()
            )));
        }
        Ok(())
    }
}

impl Split {
    /// With whole clips (`audio.length = "whole"`), where each clip lies; `None` for
    /// fixed-length clips, where a row is a clip.
    pub fn whole(&self) -> Option<&WholeIndex> {
        self.whole.as_ref()
    }

    /// Whole clip `clip` as f32 `[n_mels, frames]` (its own number of frames).
    pub fn whole_clip(&self, clip: usize) -> Result<Array2<f32>> {
        let index = self.whole_index()?;
        index.check_clip(clip)?;
        let n = index.frames(clip);
        let mut v = vec![0.0; self.n_mels() * n];
        self.reader()
            .read_whole_window(clip, (0, n), &mut v, None)?;
        Ok(Array2::from_shape_vec((self.n_mels(), n), v).expect("clip shape"))
    }

    /// The index of whole clips, or an error saying the split holds fixed-length ones.
    pub(crate) fn whole_index(&self) -> Result<&WholeIndex> {
        self.whole.as_ref().ok_or_else(|| {
            Error::Shape(format!(
                "{} holds fixed-length clips, not whole ones",
                self.path.display()
            ))
        })
    }
}

impl Reader<'_> {
    /// Reads frames `at..at + n` of whole clip `clip` into `out` (`n_mels × n`, mel-major),
    /// normalised by `norm` (for spectrograms of `n` frames) if given.
    pub fn read_whole_window(
        &mut self,
        clip: usize,
        (at, n): (usize, usize),
        out: &mut [f32],
        norm: Option<&Affine>,
    ) -> Result<()> {
        let split = self.split();
        let index = split.whole_index()?;
        index.check_clip(clip)?;
        let (m, f, t) = (split.n_mels(), index.block_frames(), index.frames(clip));
        if n == 0 || at + n > t || out.len() != m * n {
            return Err(Error::Shape(format!(
                "an output of {} values for frames {at}..{} of a clip of {t} frames and {m} mel bins",
                out.len(),
                at + n
            )));
        }
        let first = index.rows(clip).start;
        let mut part = Vec::new();
        let mut frame = at;
        while frame < at + n {
            let (k, lo) = (frame / f, frame % f);
            let len = (f - lo).min(at + n - frame);
            part.resize(m * len, 0.0);
            self.read_window_into(first + k, None, (lo, len), OutSlice::F32(&mut part), None)?;
            for b in 0..m {
                let dst = b * n + (frame - at);
                out[dst..dst + len].copy_from_slice(&part[b * len..(b + 1) * len]);
            }
            frame += len;
        }
        if !convert::normalised(out, norm) {
            return Err(Error::config(
                "normalize",
                format!(
                    "clip {clip} of {}: normalising it by the statistics given gives a value that is not finite in float32",
                    split.path.display()
                ),
            ));
        }
        Ok(())
    }
}
