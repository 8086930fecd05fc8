//! Whole clips in a split (`audio.length = "whole"`): `mel` holds rows of
//! [`BLOCK_FRAMES`](mel_core::plan::BLOCK_FRAMES) frames, each clip a run of rows of one
//! path. The index of clips is derived at open from what every row carries (its path and
//! its source's rate and frame count, which give the clip's length), and checked: a run
//! that is not exactly the blocks its length needs refuses the file.

use std::ops::Range;

use mel_core::plan::{WholeClips, Windowing};
use mel_core::{Dtype, Error, Result};
use ndarray::Array2;

use super::Split;
use super::reader::Reader;
use crate::convert::{self, Affine, OutSlice};
use crate::limits::bad;
use crate::widen::{self, Finite, RowMap, Runs};
use crate::widen_mixed::{Jump, Member, MixRuns, group_mixed_into};

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
        let rows_of = |samples: u64| geometry.blocks(geometry.frames(samples));
        let (starts, samples) = runs(split, sample_rate, &rows_of)?;
        Ok(WholeIndex {
            geometry,
            starts,
            frames: samples
                .iter()
                .map(|&n| geometry.frames(n) as usize)
                .collect(),
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

/// The runs of rows of `split`, one per file: each file's first row (then the row
/// count), and its samples at `sample_rate`. A file of `n` samples has `rows_of(n)` rows,
/// all of its path, label and source; any other run refuses the file.
fn runs(
    split: &Split,
    sample_rate: u32,
    rows_of: &dyn Fn(u64) -> u64,
) -> Result<(Vec<usize>, Vec<u64>)> {
    let p = &split.provenance;
    let (Some(rates), Some(lengths)) = (&p.source_rate, &p.source_frames) else {
        return Err(bad(
            &split.path,
            "holds files read whole (whole clips or windows) but not each row's source rate and frame count, which give each file's rows",
        ));
    };
    let rows = split.clips();
    let (mut starts, mut all) = (vec![0], Vec::new());
    let mut seen = std::collections::HashSet::new();
    let mut r = 0;
    while r < rows {
        // A file is one run: its path twice (two runs) is not what melctl writes.
        if !seen.insert(split.paths[r].as_str()) {
            return Err(bad(
                &split.path,
                format!(
                    "row {r} begins a second run of rows of {}: a file's rows are one run",
                    split.paths[r]
                ),
            ));
        }
        let samples = (lengths[r] as u128 * sample_rate as u128)
            .div_ceil(rates[r].max(1) as u128)
            .min(u64::MAX as u128) as u64;
        let n = rows_of(samples);
        let end = (r as u64).saturating_add(n);
        let same = |q: usize| {
            split.paths[q] == split.paths[r]
                && rates[q] == rates[r]
                && lengths[q] == lengths[r]
                && split.labels[q] == split.labels[r]
        };
        if n == 0 || end > rows as u64 || !(r..end as usize).all(same) {
            return Err(bad(
                &split.path,
                format!(
                    "row {r} ({}) begins a file of {samples} samples, which needs {n} rows of that file from it; the rows there do not match (edited, or another configuration's?)",
                    split.paths[r]
                ),
            ));
        }
        all.push(samples);
        r = end as usize;
        starts.push(r);
    }
    Ok((starts, all))
}

/// Where each file's windows lie in a split built with `audio.windows`: a row is a window.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowIndex {
    windows: Windowing,
    sample_rate: u32,
    /// The first row of each file, then the row count (files + 1 entries).
    starts: Vec<usize>,
    /// Each row's file.
    file_of: Vec<usize>,
}

impl WindowIndex {
    /// The index of `split`'s rows, cut by `windows` at `sample_rate`.
    pub(super) fn build(split: &Split, windows: Windowing, sample_rate: u32) -> Result<Self> {
        let (starts, _) = runs(split, sample_rate, &|n| windows.count(n))?;
        let mut file_of = Vec::with_capacity(split.clips());
        for (f, w) in starts.windows(2).enumerate() {
            file_of.extend(std::iter::repeat_n(f, w[1] - w[0]));
        }
        Ok(WindowIndex {
            windows,
            sample_rate,
            starts,
            file_of,
        })
    }

    /// Files in the split.
    pub fn files(&self) -> usize {
        self.starts.len() - 1
    }

    /// The rows (windows) of file `file`.
    pub fn rows(&self, file: usize) -> Range<usize> {
        self.starts[file]..self.starts[file + 1]
    }

    /// Each row's file.
    pub fn file_of(&self) -> &[usize] {
        &self.file_of
    }

    /// The first row of each file.
    pub fn first_rows(&self) -> &[usize] {
        &self.starts[..self.files()]
    }

    /// Where row `row`'s window starts in its file, in seconds.
    pub fn start_seconds(&self, row: usize) -> f64 {
        let k = row - self.starts[self.file_of[row]];
        (k * self.windows.hop) as f64 / self.sample_rate as f64
    }

    /// How files were cut.
    pub fn windowing(&self) -> &Windowing {
        &self.windows
    }
}

impl Split {
    /// With windows (`audio.windows`), each row's file and start; `None` otherwise.
    pub fn windows(&self) -> Option<&WindowIndex> {
        self.windows.as_ref()
    }

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
        self.read_whole_rows(clip, (at, n), out, n, &[])?;
        let split = self.split();
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

    /// Reads frames `at..at + n` of whole clip `clip` as f32 into the first `n` values of
    /// each of `n_mels` rows of `stride` values of `out`: each block's bytes fetched once,
    /// each mel bin's run of frames widened straight into place and mapped (mel bin `b`
    /// by `maps[b]`; none if empty), every value checked finite. An error if a
    /// stored value is not; else whether every normalised value is finite.
    pub(crate) fn read_whole_rows(
        &mut self,
        clip: usize,
        (at, n): (usize, usize),
        out: &mut [f32],
        stride: usize,
        maps: &[RowMap],
    ) -> Result<bool> {
        let split = self.split();
        let index = split.whole_index()?;
        index.check_clip(clip)?;
        let (m, f, t) = (split.n_mels(), index.block_frames(), index.frames(clip));
        if n == 0 || at + n > t || stride < n || out.len() < (m - 1) * stride + n {
            return Err(Error::Shape(format!(
                "an output of {} values ({stride} a row) for frames {at}..{} of a clip of {t} frames and {m} mel bins",
                out.len(),
                at + n
            )));
        }
        let (dtype, size) = (split.dtype(), split.dtype().size());
        let first = index.rows(clip).start;
        // A mapped clip's rows as one slice up to the last block read: a block found by
        // arithmetic, and the kernel's prefetches reaching on into the next block read
        // (`widen::PREFETCH_BYTES`), never past the frames asked for.
        let row_len = m * f * size;
        let rows = self
            .mapped_rows(index.rows(clip))?
            .map(|rows| &rows[..(at + n).div_ceil(f) * row_len]);
        let mut halves = Vec::new();
        let mut finite = Finite::default();
        // One map for every mel bin (none, or a gain alone) is given to the kernel as one,
        // which then finds it once, not a row at a time: a gain on unnormalised buckets
        // cost 12–14% of the CPU time an epoch, 3–5% so (journal, 2026-11-30).
        let one_map = match maps.len() {
            0 => Some(RowMap::Keep),
            n if n == m => RowMap::one_for_all(maps),
            _ => None,
        };
        let mut frame = at;
        while frame < at + n {
            let (k, lo) = (frame / f, frame % f);
            let len = (f - lo).min(at + n - frame);
            let bytes = match rows {
                Some(rows) => &rows[k * row_len..],
                None => self.row_bytes(first + k)?,
            };
            let dst = &mut out[frame - at..];
            let runs = Runs {
                rows: m,
                len,
                src_stride: f,
                dst_stride: stride,
            };
            let found = match (dtype, one_map) {
                (Dtype::F16 | Dtype::Bf16, Some(m)) => widen::runs_mapped_by(
                    dtype == Dtype::Bf16,
                    &bytes[lo * size..],
                    dst,
                    runs,
                    |_| m,
                ),
                (Dtype::F16 | Dtype::Bf16, None) => widen::runs_mapped_into(
                    dtype == Dtype::Bf16,
                    &bytes[lo * size..],
                    dst,
                    runs,
                    maps,
                ),
                (Dtype::F32, _) => {
                    let mut found = Finite::default();
                    for b in 0..m {
                        let src = &bytes[(b * f + lo) * size..(b * f + lo + len) * size];
                        let dst = &mut dst[b * stride..][..len];
                        found.stored &=
                            convert::convert(src, dtype, OutSlice::F32(dst), None, &mut halves);
                        if let Some(&map) = maps.get(b) {
                            found.normalised &= map.apply_all(dst);
                        }
                    }
                    found
                }
            };
            finite.stored &= found.stored;
            finite.normalised &= found.normalised;
            frame += len;
        }
        self.judge_row(clip, finite.stored)?;
        Ok(finite.normalised)
    }

    /// Whether [`Reader::read_whole_group`] and [`Reader::read_group_into`] read this
    /// split: f16 values in a memory map.
    pub(crate) fn reads_groups(&self) -> bool {
        self.is_mapped() && self.split().dtype() == Dtype::F16
    }

    /// [`Reader::reads_groups`] as a check: an error naming the split where it is not.
    pub(crate) fn check_reads_groups(&self) -> Result<()> {
        match self.reads_groups() {
            true => Ok(()),
            false => Err(Error::Shape(format!(
                "{} is not f16 values in a memory map, which mixed groups are read from",
                self.split().path.display()
            ))),
        }
    }

    /// Reads frames `c0..c1` of a group of items that mixup mixes (a pair, or a
    /// three-cycle), each `width` frames of which its first `real` are its clip's from
    /// frame `at` (zeros after), into `out` (each item's rows of `width` values, from its
    /// frame `c0`): the members' runs widened, mapped by their `maps`, mixed and
    /// time-masked by their `keep` bits in one pass ([`group_mixed_into`]: each with the
    /// next), the same bits as reading each, then mixing, then zeroing the masked frames.
    /// The members are judged in order, each as reading it alone would be: an error if one
    /// of its stored values is not finite, else the member's place if one of
    /// its normalised values is not (`Some(k)`: the caller's error), else the next member.
    /// An error too if the split is not one [`Reader::reads_groups`].
    pub(crate) fn read_whole_group<'m, const N: usize>(
        &mut self,
        group: [GroupItem<'m>; N],
        mut out: [&mut [f32]; N],
        (c0, c1, width): (usize, usize, usize),
    ) -> Result<Option<usize>> {
        let split = self.split();
        let index = split.whole_index()?;
        let (m, f) = (split.n_mels(), index.block_frames());
        self.check_reads_groups()?;
        let keeps = group.iter().filter(|p| !p.keep.is_empty()).count();
        for p in &group {
            index.check_clip(p.clip)?;
            if (keeps > 0 && p.keep.len() < width + 7) || (keeps != 0 && keeps != N) {
                return Err(Error::Shape(format!(
                    "keep bits for {keeps} of {N} members, {} of them for an item of {width} frames",
                    p.keep.len()
                )));
            }
            if p.real > width || p.at + p.real > index.frames(p.clip) {
                return Err(Error::Shape(format!(
                    "an item of {width} frames with {} real from frame {} of a clip of {} frames",
                    p.real,
                    p.at,
                    index.frames(p.clip)
                )));
            }
        }
        let need = (m.max(1) - 1) * width + c1.saturating_sub(c0);
        if c0 > c1 || c1 > width || out.iter().any(|o| o.len() < need) {
            return Err(Error::Shape(format!(
                "outputs of {:?} values for frames {c0}..{c1} of {m} rows of {width}",
                out.iter().map(|o| o.len()).collect::<Vec<_>>()
            )));
        }
        let zeros = vec![0u8; 2 * f];
        // Each member's rows, one slice: a run's source is found by arithmetic, and its
        // last 1–7 values are loaded as they lie (the next row's values after them) rather
        // than copied through a buffer at the end of each row (2% of a mixed crop epoch).
        // Each up to its last block read: the kernel's prefetches go no further.
        let row_len = 2 * m * f;
        let mut clips = [&[][..]; N];
        for (bytes, p) in clips.iter_mut().zip(&group) {
            let rows = self
                .mapped_rows(index.rows(p.clip))?
                .expect("reads_groups: a mapped split");
            *bytes = &rows[..(p.at + p.real).div_ceil(f) * row_len];
        }
        // A member whose mel bins share one map (a gain alone) gives the kernel that one,
        // which it then finds once, not each run.
        let maps = group.map(|p| match RowMap::one_for_all(p.maps) {
            Some(_) => &p.maps[..1],
            None => p.maps,
        });
        let mut found = [Finite::default(); N];
        let mut c = c0;
        while c < c1 {
            if group.iter().all(|p| c >= p.real) {
                // Padding in every member: their mixtures are zero.
                for o in &mut out {
                    for r in 0..m {
                        o[r * width + c - c0..r * width + c1 - c0].fill(0.0);
                    }
                }
                break;
            }
            let mut end = c1;
            // A run from frame `c` reads its keep bits from there.
            let keep = |p: &GroupItem<'m>| -> &'m [u32] { p.keep.get(c..).unwrap_or_default() };
            let mut members = group.map(|p| Member {
                src: &zeros,
                stride: 0,
                maps: &[],
                weight: p.weight,
                keep: keep(&p),
                jump: None,
            });
            // The run ends where the first member still in its clip ends its block (or
            // any member its clip); another member's block may end within it, where its
            // values jump to its next block's rows (`Jump`): crops start at any frame, and
            // runs cut at every member's block ends were half as long.
            let lead = group
                .iter()
                .find(|p| c < p.real)
                .expect("a member not in padding");
            end = end.min(c + f - (lead.at + c) % f);
            for p in group.iter().filter(|p| c < p.real) {
                end = end.min(p.real);
            }
            for (((p, member), bytes), maps) in group.iter().zip(&mut members).zip(clips).zip(maps)
            {
                if c < p.real {
                    let (k, lo) = ((p.at + c) / f, (p.at + c) % f);
                    let at = f - lo;
                    *member = Member {
                        src: &bytes[k * row_len + 2 * lo..],
                        stride: f,
                        maps,
                        weight: p.weight,
                        keep: keep(p),
                        // Row `r` of the next block is `(m − 1)·f` values after row `r` of
                        // this one ends.
                        jump: (at < end - c).then_some(Jump {
                            at,
                            skip: (m - 1) * f,
                        }),
                    };
                }
            }
            // The frames after this run are written by the runs after it.
            let runs = MixRuns {
                rows: m,
                len: end - c,
                dst_stride: width,
                slack: c1 - end,
                prefetch: true,
            };
            let got = group_mixed_into(members, out.each_mut().map(|o| &mut o[c - c0..]), runs);
            for (all, g) in found.iter_mut().zip(got) {
                all.stored &= g.stored;
                all.normalised &= g.normalised;
            }
            c = end;
        }
        for (k, (p, fnd)) in group.iter().zip(&found).enumerate() {
            self.judge_row(p.clip, fnd.stored)?;
            if !fnd.normalised {
                return Ok(Some(k));
            }
        }
        Ok(None)
    }
}

/// One member of a group [`Reader::read_whole_group`] reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupItem<'m> {
    /// Its whole clip.
    pub clip: usize,
    /// The clip's frame the item starts at.
    pub at: usize,
    /// The item's frames from its clip (the rest of its width is padding).
    pub real: usize,
    /// Each mel bin's map (empty: kept as stored).
    pub maps: &'m [RowMap],
    /// Its own share of its mixture.
    pub weight: f32,
    /// Each of its frames' keep bits (its time masks, applied as it is stored: `u32::MAX`
    /// kept, `0` zeroed), at least `width + 7` of them; empty: every frame kept. The
    /// members of a group have keep bits all or none.
    pub keep: &'m [u32],
}
