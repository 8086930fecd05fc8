//! One clip, start to end: frames in groups of `LANES`, transform, filterbank, log,
//! output. Generic over the instruction set; `lib.rs` instantiates it per ISA.

use crate::FloatWidth;
use crate::fft::batched::{self, BatchFft};
use crate::fft::single::{SingleFft, SingleScratch};
use crate::frames::{Chunking, Group, group, prepare_chunk};
use crate::output::OutElem;
use crate::simd::{Lanes, Simd};
use crate::tables::{Span, Tables};
use crate::{log, mel, output};

/// The transform a kernel runs.
pub(crate) enum Transform {
    /// Power-of-two sizes, f64: the batched FFT, with filter weights scaled to its output
    /// (times [`BatchFft::weight_scale`], exact).
    Batched64(BatchFft<f64>, Vec<Span>),
    /// Power-of-two sizes, f32 with the DC remedy: as `Batched64`.
    Batched32(BatchFft<f32>, Vec<Span>),
    /// Any size, f64: realfft one frame at a time.
    Single64(SingleFft<f64>),
    /// Any size, f32 with the DC remedy: realfft one frame at a time.
    Single32(SingleFft<f32>),
}

/// Everything a clip's computation reads (shared by all threads).
pub(crate) struct Kernel {
    /// The plan's tables.
    pub t: Tables,
    /// The transform.
    pub transform: Transform,
}

impl Kernel {
    /// The kernel for `t` in `precision`, batched when `batched` is asked for and the
    /// size allows it.
    pub fn new(t: Tables, precision: FloatWidth, batched: bool) -> Kernel {
        let magnitude = t.power == 1;
        let dc = Some((&t.dc_re[..], &t.dc_im[..]));
        let scaled = |scale: f32| -> Vec<Span> {
            t.filters
                .iter()
                .map(|f| Span {
                    start: f.start,
                    weights: f.weights.iter().map(|w| w * scale).collect(),
                })
                .collect()
        };
        let batched = batched && batched::supports(t.n_fft);
        let transform = match (precision, batched) {
            (FloatWidth::F64, true) => {
                let fft = BatchFft::new(&t.window, None, magnitude);
                let filters = scaled(fft.weight_scale());
                Transform::Batched64(fft, filters)
            }
            (FloatWidth::F32, true) => {
                let fft = BatchFft::new(&t.window, dc, magnitude);
                let filters = scaled(fft.weight_scale());
                Transform::Batched32(fft, filters)
            }
            (FloatWidth::F64, false) => {
                Transform::Single64(SingleFft::new(&t.window, None, magnitude))
            }
            (FloatWidth::F32, false) => {
                Transform::Single32(SingleFft::new(&t.window, dc, magnitude))
            }
        };
        Kernel { t, transform }
    }

    /// Whether the batched FFT runs.
    pub fn batched(&self) -> bool {
        matches!(
            self.transform,
            Transform::Batched64(..) | Transform::Batched32(..)
        )
    }
}

/// 64-byte aligned floats.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// A buffer of floats on 64-byte boundaries (whole vectors never straddle cache lines).
pub(crate) struct Aligned(Vec<Line>);

impl Aligned {
    /// Room for `floats` f32 values (or half as many f64).
    pub(crate) fn new(floats: usize) -> Aligned {
        Aligned(vec![Line([0.0; 16]); floats.div_ceil(16)])
    }
    /// The first element.
    pub(crate) fn ptr<E>(&mut self) -> *mut E {
        self.0.as_mut_ptr().cast()
    }
}

/// Per-thread buffers of a single-frame transform.
enum SingleBufs {
    F64(SingleScratch<f64>),
    F32(SingleScratch<f32>),
    None,
}

/// Per-thread buffers.
pub(crate) struct Scratch {
    pad: Vec<f32>,
    buf: Aligned,
    power: Aligned,
    distinct: Vec<f32>,
    single: SingleBufs,
}

impl Scratch {
    /// Buffers for `k` with `lanes`-wide vectors.
    pub fn new(k: &Kernel, lanes: usize) -> Scratch {
        let t = &k.t;
        // Batched f64 runs 4-lane vectors, f32 8-lane ones: both need at most 8 bytes per
        // value per f32 lane.
        let (buf_bytes, single) = match &k.transform {
            Transform::Batched64(fft, _) => (fft.buffer_len(lanes) * 8, SingleBufs::None),
            Transform::Batched32(fft, _) => (fft.buffer_len(lanes) * 4, SingleBufs::None),
            Transform::Single64(f) => (0, SingleBufs::F64(f.scratch())),
            Transform::Single32(f) => (0, SingleBufs::F32(f.scratch())),
        };
        Scratch {
            pad: vec![0.0; Chunking::new(t, lanes).buffer],
            buf: Aligned::new(buf_bytes.div_ceil(4)),
            power: Aligned::new(t.n_freqs * lanes),
            distinct: vec![0.0; t.distinct() * t.vps],
            single,
        }
    }
}

/// Computes one clip (`t.clip_samples` samples) into `dst` (`t.vpc` values): `s` runs
/// the f32 stages (and the f32 transform), `d` the f64 transform.
#[inline(always)]
pub(crate) fn clip_mel<S: Simd, D: Lanes<E = f64>, T: OutElem>(
    s: S,
    d: D,
    k: &Kernel,
    sc: &mut Scratch,
    clip: &[f32],
    dst: &mut [T],
) {
    let t = &k.t;
    let l = S::LANES;
    let chunking = Chunking::new(t, l);
    let Scratch {
        pad,
        buf,
        power,
        distinct,
        single,
    } = sc;
    let power = power.ptr::<f32>();
    let nf = t.n_frames;
    let mut starts = [std::ptr::null(); 64];
    let segs_per_chunk = chunking.segs.min(starts.len());
    for first in (0..t.distinct()).step_by(segs_per_chunk) {
        let segs = segs_per_chunk.min(t.distinct() - first);
        prepare_chunk(t, clip, pad, first, segs, &mut starts);
        let frames = segs * nf;
        for f0 in (0..frames).step_by(l) {
            let g = group(t, &starts[..segs], first, frames, f0, l);
            // SAFETY: the rows are frames of `n_fft` samples (frames::group); `buf` and
            // `power` were sized for this kernel and `l` lanes (Scratch::new); each run of
            // `D::LANES` frames writes its own columns of the `l`-wide power rows.
            unsafe {
                match (&k.transform, &mut *single) {
                    (Transform::Batched64(fft, filters), _) => {
                        let buf = buf.ptr::<f64>();
                        let mut j = 0;
                        while j < l {
                            fft.run(d, &g.rows[j..j + D::LANES], buf, power.add(j), l);
                            j += D::LANES;
                        }
                        mel::filterbank(s, filters, power, &g, nf, distinct);
                    }
                    (Transform::Batched32(fft, filters), _) => {
                        fft.run(s, &g.rows[..l], buf.ptr::<f32>(), power, l);
                        mel::filterbank(s, filters, power, &g, nf, distinct);
                    }
                    (Transform::Single64(fft), SingleBufs::F64(sb)) => {
                        single_group(t, l, &g, power, |f, o| fft.run(sb, f, o, l));
                        mel::filterbank(s, &t.filters, power, &g, nf, distinct);
                    }
                    (Transform::Single32(fft), SingleBufs::F32(sb)) => {
                        single_group(t, l, &g, power, |f, o| fft.run(sb, f, o, l));
                        mel::filterbank(s, &t.filters, power, &g, nf, distinct);
                    }
                    _ => unreachable!("scratch made for this kernel"),
                }
            }
        }
    }
    log::apply(s, &t.log, distinct, t.vps);
    output::write(t, distinct, dst);
}

/// Transforms a group's frames one at a time with `run(frame, out)`, which writes bin
/// `k` of the frame to `out[k · lanes]`; lanes past the group's end get zeros.
///
/// # Safety
/// `power` is writable for `n_freqs · lanes` floats, and each active row of `g` is
/// readable for `n_fft` samples.
#[inline(always)]
unsafe fn single_group(
    t: &Tables,
    lanes: usize,
    g: &Group,
    power: *mut f32,
    mut run: impl FnMut(&[f32], &mut [f32]),
) {
    // SAFETY: the caller's contract.
    let pw = unsafe { std::slice::from_raw_parts_mut(power, t.n_freqs * lanes) };
    for j in 0..lanes {
        if j < g.active {
            // SAFETY: an active row is a frame of `n_fft` readable samples.
            let frame = unsafe { std::slice::from_raw_parts(g.rows[j], t.n_fft) };
            run(frame, &mut pw[j..]);
        } else {
            pw[j..].iter_mut().step_by(lanes).for_each(|x| *x = 0.0);
        }
    }
}

/// Transforms consecutive frames of `n_fft` samples (`frames.len() / n_fft` of them, a
/// multiple of 8) and writes their power spectra as rows of 8 lanes: bin `k` of frame
/// `8g + j` at `out[(g · n_freqs + k) · 8 + j]`, in the transform's scale (the batched
/// FFT writes `4·|X|²`). For the `fft_speed` example and the transform tests.
#[inline(always)]
pub(crate) fn transform_frames<S: Simd, D: Lanes<E = f64>>(
    s: S,
    d: D,
    k: &Kernel,
    buf: &mut Aligned,
    frames: &[f32],
    out: &mut [f32],
) {
    let t = &k.t;
    let (n, l) = (t.n_fft, 8);
    assert!(S::LANES == l && frames.len().is_multiple_of(n * l));
    assert!(out.len() >= frames.len() / n * t.n_freqs);
    let groups = frames.len() / (n * l);
    let mut single64 = None;
    let mut single32 = None;
    for g in 0..groups {
        let rows: [*const f32; 8] = std::array::from_fn(|j| frames[(g * l + j) * n..].as_ptr());
        let power = out[g * t.n_freqs * l..].as_mut_ptr();
        // SAFETY: each row holds `n` samples (asserted above); `buf` was sized for the
        // kernel (the caller), and `out` holds this group's n_freqs rows of 8.
        unsafe {
            match &k.transform {
                Transform::Batched64(fft, _) => {
                    let mut j = 0;
                    while j < l {
                        fft.run(d, &rows[j..j + D::LANES], buf.ptr(), power.add(j), l);
                        j += D::LANES;
                    }
                }
                Transform::Batched32(fft, _) => fft.run(s, &rows, buf.ptr(), power, l),
                Transform::Single64(fft) => {
                    let sb = single64.get_or_insert_with(|| fft.scratch());
                    let pw = std::slice::from_raw_parts_mut(power, t.n_freqs * l);
                    for (j, &r) in rows.iter().enumerate() {
                        fft.run(sb, std::slice::from_raw_parts(r, n), &mut pw[j..], l);
                    }
                }
                Transform::Single32(fft) => {
                    let sb = single32.get_or_insert_with(|| fft.scratch());
                    let pw = std::slice::from_raw_parts_mut(power, t.n_freqs * l);
                    for (j, &r) in rows.iter().enumerate() {
                        fft.run(sb, std::slice::from_raw_parts(r, n), &mut pw[j..], l);
                    }
                }
            }
        }
    }
}
