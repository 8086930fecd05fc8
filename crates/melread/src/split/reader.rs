//! Reading items (a clip, or one of its segments) of a split on one thread: the stored
//! bytes from wherever the store keeps them, a least-recently-used cache of decoded chunks
//! for chunked layouts, and the conversion to f32 that checks every value finite.

use std::os::unix::fs::FileExt;

use mel_core::{Dtype, Error, Result};

use super::{Split, Store};
use crate::convert::{self, Affine, OutSlice};
use crate::limits::bad;
use crate::widen::{self, Finite, RowMap};
use crate::widen_mixed::{Member, MixRuns, group_mixed_into};

/// Reads items of one [`Split`] on one thread, reusing its buffers (and, for chunked
/// layouts, up to [`OpenOptions::chunk_cache`](crate::OpenOptions::chunk_cache) decoded
/// chunks).
pub struct Reader<'a> {
    split: &'a Split,
    scratch: Vec<u8>,
    halves: Vec<u16>,
    cache: Vec<CachedChunk>,
    inflater: Option<libdeflater::Decompressor>,
    tick: u64,
    /// Whether the caller looks at the mapped file once a batch ([`Reader::check_file`])
    /// rather than this reader at every read.
    per_batch: bool,
}

/// One member of a group of items that mixup mixes, read in one pass
/// ([`Reader::read_group_into`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupMember<'m> {
    /// The member's clip.
    pub clip: usize,
    /// Its segment, where items are segments.
    pub segment: Option<usize>,
    /// The first frame of its window.
    pub at: usize,
    /// Each row's map (normalisation and gain), one a row.
    pub maps: &'m [RowMap],
    /// Its own share of its mixture (mixup's λ).
    pub weight: f32,
    /// Each frame's keep bits (its time masks: [`crate::widen_mixed::Member::keep`]), at
    /// least the window's frames rounded up to eight; empty: every frame kept.
    pub keep: &'m [u32],
}

/// One decoded chunk in a reader's cache, and when it was last used.
struct CachedChunk {
    index: usize,
    bytes: Vec<u8>,
    used: u64,
}

impl<'a> Reader<'a> {
    /// A reader of `split` with empty buffers and an empty chunk cache.
    pub(super) fn new(split: &'a Split) -> Reader<'a> {
        Reader {
            split,
            scratch: Vec::new(),
            halves: Vec::new(),
            cache: Vec::new(),
            inflater: None,
            tick: 0,
            per_batch: false,
        }
    }

    /// Looks at the mapped file only when told ([`Reader::check_file`], the loader's once
    /// a batch) instead of at every read: a `fstat` a read would cost the loader's small
    /// items a tenth of their rate.
    pub(crate) fn check_file_per_batch(&mut self) {
        self.per_batch = true;
    }

    /// Refuses a mapped split whose map faulted or whose file changed since it was mapped
    /// (shorter than its data needs, or modified: [`Mapped`](super::store::Mapped)).
    /// Anything read before this is the file's as it was mapped if this says so.
    pub(crate) fn check_file(&self) -> Result<()> {
        self.check_faults()?;
        match &self.split.store {
            Store::Map { file, .. } if file.changed() => Err(changed(&self.split.path)),
            _ => Ok(()),
        }
    }

    /// The split read.
    pub fn split(&self) -> &'a Split {
        self.split
    }

    /// Reads clip `clip` as f32 into `out` (`values_per_clip` values), normalised by
    /// `norm` if given.
    pub fn read_clip(&mut self, clip: usize, out: &mut [f32], norm: Option<&Affine>) -> Result<()> {
        self.read_into(clip, None, OutSlice::F32(out), (norm, None))
    }

    /// Reads segment `segment` of clip `clip` as f32 into `out` (`values_per_segment`
    /// values), normalised by `norm` if given.
    pub fn read_segment(
        &mut self,
        clip: usize,
        segment: usize,
        out: &mut [f32],
        norm: Option<&Affine>,
    ) -> Result<()> {
        self.read_into(clip, Some(segment), OutSlice::F32(out), (norm, None))
    }

    /// The stored little-endian bytes of clip `clip` (or one of its segments). From a map
    /// they are copied first, so that a file truncated under the map is found here (see
    /// [`crate::sigbus`]), not in the caller's copy.
    pub fn raw(&mut self, clip: usize, segment: Option<usize>) -> Result<&[u8]> {
        if let Store::Map { .. } = &self.split.store {
            let mut scratch = std::mem::take(&mut self.scratch);
            let copied = self.item_bytes(clip, segment).map(|b| {
                scratch.clear();
                scratch.extend_from_slice(b);
            });
            self.scratch = scratch;
            copied?;
            self.check_unchanged()?;
            return Ok(&self.scratch);
        }
        self.item_bytes(clip, segment)
    }

    /// Refuses a split whose file changed while it was read: its map faulted (a
    /// truncation across a page, or a failing disk), or, unless the caller looks once a
    /// batch ([`Reader::check_file_per_batch`]), the file is shorter or was modified.
    fn check_unchanged(&self) -> Result<()> {
        match self.per_batch {
            true => self.check_faults(),
            false => self.check_file(),
        }
    }

    /// Refuses a split whose map faulted: what was read may hold zeros where the file
    /// had data.
    fn check_faults(&self) -> Result<()> {
        match &self.split.store {
            Store::Map { guard, .. } if guard.faulted() => Err(changed(&self.split.path)),
            _ => Ok(()),
        }
    }

    /// Reads an item (a clip, or one segment) into `out`: converted to f32 (normalised,
    /// then given `gain` dB, if any) or copied as stored.
    pub(crate) fn read_into(
        &mut self,
        clip: usize,
        segment: Option<usize>,
        out: OutSlice<'_>,
        (norm, gain): (Option<&Affine>, Option<f32>),
    ) -> Result<()> {
        let dtype = self.split.dtype;
        let (_, len) = self.split.item_range(clip, segment)?;
        let want = len / dtype.size();
        if out.len() != want {
            return Err(Error::Shape(format!(
                "an output of {} values for an item of {want}",
                out.len()
            )));
        }
        let mut halves = std::mem::take(&mut self.halves);
        let r = self
            .item_bytes(clip, segment)
            .map(|bytes| convert::convert_gained(bytes, dtype, out, (norm, gain), &mut halves));
        self.halves = halves;
        let finite = r?;
        self.judge(clip, segment, finite, norm.is_some())
    }

    /// Reads frames `at..at + crop` of every row of an item into `out` (rows of `crop`
    /// values), converted, normalised and given `gain` dB as [`read_into`](Self::read_into)
    /// does; `norm` is for spectrograms of `crop` frames. Only the window is converted, f16
    /// in one pass.
    pub(crate) fn read_window_into(
        &mut self,
        clip: usize,
        segment: Option<usize>,
        (at, crop): (usize, usize),
        out: OutSlice<'_>,
        (norm, gain): (Option<&Affine>, Option<f32>),
    ) -> Result<()> {
        let dtype = self.split.dtype;
        let (size, frames) = (dtype.size(), self.split.frames());
        let (_, len) = self.split.item_range(clip, segment)?;
        let rows = len / size / frames.max(1);
        if out.len() != rows * crop || crop == 0 || at + crop > frames {
            return Err(Error::Shape(format!(
                "an output of {} values for a window of frames {at}..{} of an item of {rows} rows of {frames}",
                out.len(),
                at + crop
            )));
        }
        let mut halves = std::mem::take(&mut self.halves);
        let r = self.item_bytes(clip, segment).map(|bytes| {
            let row = |r: usize| &bytes[(r * frames + at) * size..(r * frames + at + crop) * size];
            match out {
                OutSlice::F32(out) if dtype == Dtype::F16 => {
                    let runs = widen::Runs {
                        rows,
                        len: crop,
                        src_stride: frames,
                        dst_stride: crop,
                    };
                    let map = |r| convert::row_map(norm, gain, r);
                    let found = widen::runs_mapped_by(false, &bytes[at * size..], out, runs, map);
                    found.stored && found.normalised
                }
                OutSlice::F32(out) => {
                    let mut finite = true;
                    for (r, dst) in out.chunks_exact_mut(crop).enumerate() {
                        finite &=
                            convert::convert(row(r), dtype, OutSlice::F32(dst), None, &mut halves);
                    }
                    let finite = convert::normalised(out, norm) && finite;
                    // Judged once gained too: a gain may overflow what normalising did not.
                    let gained = gain.is_none_or(|g| convert::add_gain(out, crop, norm, g));
                    finite && gained
                }
                OutSlice::Half(out) => {
                    out.chunks_exact_mut(crop)
                        .enumerate()
                        .fold(true, |ok, (r, dst)| {
                            convert::convert(row(r), dtype, OutSlice::Half(dst), None, &mut halves)
                                && ok
                        })
                }
            }
        });
        self.halves = halves;
        let finite = r?;
        self.judge(clip, segment, finite, norm.is_some())
    }

    /// Reads frames `at..at + width` of every row of a group of items that mixup mixes (a
    /// pair, or a three-cycle; `at` each member's; or items read together unmixed, of
    /// weight 1, or one alone) into `out` (each member's rows of `width` values): the
    /// members' stored f16 runs widened, mapped by their `maps` (one a row), mixed and
    /// their `keep` bits applied in one pass ([`group_mixed_into`]: each with the next),
    /// the same bits as reading each ([`Reader::read_window_into`], [`Reader::read_into`]),
    /// mixing and zeroing the masked frames after. The members are judged in order, each
    /// as reading it alone is. An error if the split is not one [`Reader::reads_groups`]
    /// reads.
    pub(crate) fn read_group_into<const N: usize>(
        &mut self,
        group: [GroupMember<'_>; N],
        width: usize,
        mut out: [&mut [f32]; N],
    ) -> Result<()> {
        self.check_reads_groups()?;
        let frames = self.split.frames();
        let mut srcs: [&[u8]; N] = [&[]; N];
        let mut rows = 0;
        for (k, m) in group.iter().enumerate() {
            let src = self
                .mapped_item(m.clip, m.segment)?
                .expect("reads_groups: a mapped split");
            let at = m.at;
            rows = src.len() / 2 / frames.max(1);
            if width == 0 || at + width > frames || out[k].len() != rows * width {
                return Err(Error::Shape(format!(
                    "an output of {} values for a window of frames {at}..{} of an item of {rows} rows of {frames}",
                    out[k].len(),
                    at + width
                )));
            }
            if m.maps.len() != rows {
                return Err(Error::Shape(format!(
                    "{} maps for {rows} rows",
                    m.maps.len()
                )));
            }
            if !m.keep.is_empty() && m.keep.len() < width.next_multiple_of(8) {
                return Err(Error::Shape(format!(
                    "{} keep bits for windows of {width} frames",
                    m.keep.len()
                )));
            }
            srcs[k] = &src[2 * at..];
        }
        // Every row but the last may store its tail's lanes whole into the next row's start
        // (written after it); the last row's stores stop at the item's end.
        let last = rows.saturating_sub(1);
        let mut found = [Finite::default(); N];
        for (r0, r1, slack) in [(0, last, width.min(7)), (last, rows, 0)] {
            if r0 == r1 {
                continue;
            }
            let members = std::array::from_fn(|k| Member {
                src: &srcs[k][2 * r0 * frames..],
                stride: frames,
                maps: &group[k].maps[r0..r1],
                weight: group[k].weight,
                keep: group[k].keep,
                jump: None,
            });
            let dst = out.each_mut().map(|o| &mut o[r0 * width..]);
            let runs = MixRuns {
                rows: r1 - r0,
                len: width,
                dst_stride: width,
                slack,
                prefetch: false,
            };
            for (all, part) in found.iter_mut().zip(group_mixed_into(members, dst, runs)) {
                all.stored &= part.stored;
                all.normalised &= part.normalised;
            }
        }
        for (m, found) in group.iter().zip(found) {
            let normalises = m.maps.iter().any(|m| matches!(m, RowMap::Normalise { .. }));
            let finite = found.stored && found.normalised;
            self.judge(m.clip, m.segment, finite, normalises)?;
        }
        Ok(())
    }

    /// The stored bytes of row `row` (a clip of the fixed layout, a block of a whole clip).
    pub(crate) fn row_bytes(&mut self, row: usize) -> Result<&[u8]> {
        self.item_bytes(row, None)
    }

    /// The stored bytes of an item (a clip, or one of its segments) where the split is
    /// memory-mapped (borrowed from the map, not from this reader, so two items can be held
    /// at once); `None` for the other stores, whose bytes pass through this reader's
    /// buffers. Reads that fault are caught by the map's guard and judged by
    /// [`Reader::judge_row`].
    fn mapped_item(&self, clip: usize, segment: Option<usize>) -> Result<Option<&'a [u8]>> {
        let split: &'a Split = self.split;
        let (offset, len) = split.item_range(clip, segment)?;
        Ok(match &split.store {
            Store::Map { map, start, .. } => Some(&map[start + offset..start + offset + len]),
            _ => None,
        })
    }

    /// The stored bytes of rows `rows` (consecutive in the map: `mel`'s rows lie one after
    /// another) where the split is memory-mapped; `None` for the other stores. A group
    /// reads a whole clip's rows as one slice: no lookup a run, and a run's last values
    /// loaded as they lie, the next row's bytes after them.
    pub(crate) fn mapped_rows(&self, rows: std::ops::Range<usize>) -> Result<Option<&'a [u8]>> {
        let split: &'a Split = self.split;
        let (first, row_len) = split.item_range(rows.start, None)?;
        if rows.end > split.clips() {
            // The error for a row beyond the split.
            split.item_range(rows.end - 1, None)?;
        }
        Ok(match &split.store {
            Store::Map { map, start, .. } => {
                Some(&map[start + first..start + first + rows.len() * row_len])
            }
            _ => None,
        })
    }

    /// Whether rows are [mapped](Reader::mapped_rows).
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self.split.store, Store::Map { .. })
    }

    /// The verdict on what was read of whole clip `clip` (its values widened, not
    /// normalised): the file unchanged, every value finite.
    pub(crate) fn judge_row(&mut self, clip: usize, finite: bool) -> Result<()> {
        self.check_unchanged()?;
        if finite {
            return Ok(());
        }
        Err(bad(
            &self.split.path,
            format!(
                "whole clip {clip} holds a value that is not finite (NaN or infinity), which melctl never stores"
            ),
        ))
    }

    /// The verdict on an item read: the file unchanged since it was opened, and every
    /// value finite (else: normalising overflowed, or the file holds what melctl never
    /// stores).
    fn judge(
        &mut self,
        clip: usize,
        segment: Option<usize>,
        finite: bool,
        normalised: bool,
    ) -> Result<()> {
        self.check_unchanged()?;
        if finite {
            return Ok(());
        }
        let item = format!(
            "clip {clip}{}",
            segment.map(|s| format!(" segment {s}")).unwrap_or_default()
        );
        // Finite as stored, not once normalised: the statistics given, not the file.
        if normalised && self.stored_finite(clip, segment)? {
            return Err(Error::config(
                "normalize",
                format!(
                    "{item} of {}: normalising it by the statistics given (with its gain, and mixed, if augmented) gives a value that is not finite in float32 (a standard deviation too small for its values?)",
                    self.split.path.display()
                ),
            ));
        }
        Err(bad(
            &self.split.path,
            format!(
                "{item} holds a value that is not finite (NaN or infinity), which melctl never stores"
            ),
        ))
    }

    /// Whether the item's stored values are all finite.
    fn stored_finite(&mut self, clip: usize, segment: Option<usize>) -> Result<bool> {
        let dtype = self.split.dtype;
        let mut halves = std::mem::take(&mut self.halves);
        let mut values = Vec::new();
        let r = self.item_bytes(clip, segment).map(|bytes| {
            values.resize(bytes.len() / dtype.size(), 0.0f32);
            convert::convert(bytes, dtype, OutSlice::F32(&mut values), None, &mut halves)
        });
        self.halves = halves;
        r
    }

    /// The stored bytes of an item, wherever they come from.
    fn item_bytes(&mut self, clip: usize, segment: Option<usize>) -> Result<&[u8]> {
        let split = self.split;
        let (offset, len) = split.item_range(clip, segment)?;
        match &split.store {
            Store::Map { map, start, .. } => {
                self.check_unchanged()?;
                Ok(&map[start + offset..start + offset + len])
            }
            Store::Pread { file, base } => {
                self.scratch.resize(len, 0);
                file.read_exact_at(&mut self.scratch, base + offset as u64)
                    .map_err(|e| Error::read(&split.path, e))?;
                Ok(&self.scratch)
            }
            Store::Library(lib) => {
                lib.read(split, clip, segment, &mut self.scratch)?;
                Ok(&self.scratch)
            }
            Store::Chunks(chunks) => {
                let index = clip / chunks.clips_per_chunk;
                let slot = self.chunk(index)?;
                let clip_bytes = split.values_per_clip() * split.elem();
                let within = offset - index * chunks.clips_per_chunk * clip_bytes;
                Ok(&self.cache[slot].bytes[within..within + len])
            }
        }
    }

    /// The cache slot holding decoded chunk `index`, decoding it if needed.
    fn chunk(&mut self, index: usize) -> Result<usize> {
        self.tick += 1;
        if let Some(slot) = self.cache.iter().position(|c| c.index == index) {
            self.cache[slot].used = self.tick;
            return Ok(slot);
        }
        let Store::Chunks(chunks) = &self.split.store else {
            unreachable!("chunk() is only called for chunked stores")
        };
        let capacity = self.split.chunk_cache.max(1);
        let slot = if self.cache.len() < capacity {
            self.cache.push(CachedChunk {
                index,
                bytes: Vec::new(),
                used: self.tick,
            });
            self.cache.len() - 1
        } else {
            let lru = (0..self.cache.len())
                .min_by_key(|&i| self.cache[i].used)
                .expect("a non-empty cache");
            self.cache[lru].index = usize::MAX;
            lru
        };
        let inflater = self
            .inflater
            .get_or_insert_with(libdeflater::Decompressor::new);
        let mut bytes = std::mem::take(&mut self.cache[slot].bytes);
        chunks.decode(
            &self.split.path,
            index,
            &mut self.scratch,
            &mut bytes,
            inflater,
        )?;
        self.cache[slot] = CachedChunk {
            index,
            bytes,
            used: self.tick,
        };
        Ok(slot)
    }
}

/// The error for split file `path` changed while it was read.
fn changed(path: &std::path::Path) -> Error {
    bad(
        path,
        "changed while it was read (truncated or overwritten by another process, or its disk failed): what was read is not the file's; open it again once it is complete",
    )
}
