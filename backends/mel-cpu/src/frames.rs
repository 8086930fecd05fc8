//! Frames of a clip: each distinct segment padded as `torch.stft(center=True)` does
//! (into a per-thread buffer), then frames taken `LANES` at a time in segment order.

use mel_core::spec::PadMode;

use crate::tables::Tables;

/// Writes `segment` with `pad` samples on each side into `out` (`len + 2·pad` values):
/// reflection without repeating the edge sample, or zeros (`mel_core::dsp::pad_segment`).
pub(crate) fn pad_into(segment: &[f32], pad: usize, mode: PadMode, out: &mut [f32]) {
    let n = segment.len();
    out[pad..pad + n].copy_from_slice(segment);
    match mode {
        PadMode::Reflect => {
            // out[pad - 1 - i] = segment[1 + i], out[pad + n + i] = segment[n - 2 - i]
            for (o, &x) in out[..pad].iter_mut().rev().zip(&segment[1..=pad]) {
                *o = x;
            }
            for (o, &x) in out[pad + n..]
                .iter_mut()
                .zip(segment[n - 1 - pad..n - 1].iter().rev())
            {
                *o = x;
            }
        }
        PadMode::Constant => {
            out[..pad].fill(0.0);
            out[pad + n..].fill(0.0);
        }
    }
}

/// How the distinct segments of a clip are cut into chunks: a chunk's segments are
/// padded together, and its frames are a whole number of `lanes`-frame groups where
/// possible (leak-4k: 8 segments × 5 frames = 5 groups of 8).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chunking {
    /// Segments per chunk.
    pub segs: usize,
    /// Floats in the padding buffer (0 when frames are read straight from the clip).
    pub buffer: usize,
}

impl Chunking {
    /// The chunking of `t` for `lanes`-wide groups.
    pub fn new(t: &Tables, lanes: usize) -> Chunking {
        let g = gcd(t.n_frames, lanes);
        let mut segs = (lanes / g).min(t.distinct()).max(1);
        // Keep the padding buffer small (≤ 1 MiB): long segments go one at a time.
        if segs * t.padded_len() > 1 << 18 {
            segs = 1;
        }
        Chunking {
            segs,
            buffer: if t.pad > 0 { segs * t.padded_len() } else { 0 },
        }
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// One group of frames: where each lane's samples start and where its mel values go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Group {
    /// Lanes holding a real frame (the rest repeat the last one).
    pub active: usize,
    /// Each lane's first sample.
    pub rows: [*const f32; 16],
    /// Each lane's output offset in the clip's distinct buffer: `d · vps + t`.
    pub out: [usize; 16],
}

/// Pads the chunk of segments `first .. first + segs` into `pad_buf` (when centred) and
/// returns where each of its segments starts; `segs` is at most [`Chunking::segs`].
#[inline(always)]
pub(crate) fn prepare_chunk(
    t: &Tables,
    clip: &[f32],
    pad_buf: &mut [f32],
    first: usize,
    segs: usize,
    starts: &mut [*const f32],
) {
    let plen = t.padded_len();
    for s in 0..segs {
        let o = t.offsets[first + s];
        starts[s] = if t.pad > 0 {
            let out = &mut pad_buf[s * plen..(s + 1) * plen];
            pad_into(&clip[o..o + t.seg_len], t.pad, t.pad_mode, out);
            out.as_ptr()
        } else {
            clip[o..].as_ptr()
        };
    }
}

/// The group of `lanes` frames starting at frame `f0` of a chunk whose first segment is
/// `first` and whose segments start at `starts` (`frames` frames in the chunk).
#[inline(always)]
pub(crate) fn group(
    t: &Tables,
    starts: &[*const f32],
    first: usize,
    frames: usize,
    f0: usize,
    lanes: usize,
) -> Group {
    let nf = t.n_frames;
    let active = lanes.min(frames - f0);
    let mut g = Group {
        active,
        rows: [std::ptr::null(); 16],
        out: [0; 16],
    };
    // One division per group; the lanes step through (segment, frame) by counting.
    let (mut s, mut tt) = (f0 / nf, f0 % nf);
    for j in 0..lanes {
        // Frame `tt` of a (padded) segment ends inside it (frame_count), so the row stays
        // within the slice `starts[s]` points into.
        g.rows[j] = starts[s].wrapping_add(tt * t.hop);
        g.out[j] = (first + s) * t.vps + tt;
        // Lanes past the last frame repeat it.
        if j + 1 < active {
            tt += 1;
            if tt == nf {
                tt = 0;
                s += 1;
            }
        }
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::dsp::pad_segment;

    #[test]
    fn padding_matches_the_core_definition() {
        let seg: Vec<f32> = (0..37).map(|i| (i * i) as f32).collect();
        for pad in [0, 1, 5, 36] {
            for mode in [PadMode::Reflect, PadMode::Constant] {
                let mut expect = vec![];
                pad_segment(&seg, pad, mode, &mut expect);
                let mut out = vec![f32::NAN; seg.len() + 2 * pad];
                pad_into(&seg, pad, mode, &mut out);
                assert_eq!(out, expect, "pad {pad} {mode:?}");
            }
        }
    }
}
