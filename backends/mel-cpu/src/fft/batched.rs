//! A real FFT of `n` points (a power of two, 4 to 2^16) on `LANES` frames at once, one
//! frame per lane, so every butterfly is plain vector arithmetic with no shuffles. Generic
//! over the element: f64 (4 lanes on AVX2, the default) or f32 (8 lanes).
//!
//! Layout: the `n` real samples of each frame are packed as `n/2` complex values
//! `z[m] = x[2m] + i·x[2m+1]`, stored as `2 · n/2` vectors (re, im of position `p`, each
//! `LANES` frames wide) in bit-reversed order, which the gather writes directly. Then an
//! in-place decimation-in-time FFT of `n/2` points (a first stage of radix 2 or 4 that
//! also takes out the frame's mean and applies the window, then radix-4 stages), and a
//! last pass that splits the packed spectrum into the real signal's, adds back the
//! mean's contribution and writes the power as f32. Twiddles come from one f64-computed
//! table (`mel_core::dsp::dft_twiddles`), rounded once for f32 (the values of
//! `twiddles_f32`); no twiddle is a product of others. The mean is taken out only in f32
//! (the DC remedy); an f64 transform does not need it.
//!
//! The last pass computes `2·X[k]` (it skips two halvings), so the power it writes is
//! `4·|X|²` (`2·|X|` for magnitude): the filterbank weights are scaled by the exact
//! inverse power of two ([`BatchFft::weight_scale`]).

use mel_core::dsp::dft_twiddles;

use crate::simd::{Elem, Lanes};

/// One radix-4 stage: butterflies of span `h` and their twiddles
/// `(w^j, w^2j, w^3j)` of size `4h`, as `[re, im]` × 3 per `j < h`.
#[derive(Debug, Clone)]
struct Stage<E> {
    h: usize,
    tw: Vec<E>,
}

/// The plan of one batched real FFT size.
#[derive(Debug, Clone)]
pub(crate) struct BatchFft<E> {
    /// Real size `n`.
    n: usize,
    /// Complex size `n / 2`.
    m: usize,
    /// For sample `i`: the vector (of `2m`) it is gathered into.
    slot: Vec<u32>,
    /// The window, permuted like the samples: `wperm[slot[i]] = window[i]`.
    wperm: Vec<E>,
    /// Whether the first stage is radix 2 (`log2 m` odd) rather than radix 4.
    first_radix2: bool,
    /// The radix-4 stages after the first.
    stages: Vec<Stage<E>>,
    /// `exp(-2πik/n)` for `k ≤ m/2`, as `[re, im]`: the real split's twiddles.
    split_tw: Vec<[E; 2]>,
    /// Whether each frame's mean is taken out before the transform (the DC remedy).
    dc_remedy: bool,
    /// The window's spectrum at bins `< dc_re.len()`, times 2 (the split's scale).
    dc_re: Vec<E>,
    /// Imaginary part, as `dc_re`.
    dc_im: Vec<E>,
    /// Whether to write magnitude (`|X|`) instead of power.
    magnitude: bool,
}

/// Whether the batched FFT covers `n`.
pub(crate) fn supports(n: usize) -> bool {
    n.is_power_of_two() && (4..=1 << 16).contains(&n)
}

impl<E: Elem> BatchFft<E> {
    /// The plan for `n`-point frames weighted by `window` (length `n`, rounded to `E`
    /// once). `dc`: the window's spectrum `(re, im)` at its first bins, for the DC remedy
    /// (`None`: no remedy).
    pub fn new(window: &[f64], dc: Option<(&[f32], &[f32])>, magnitude: bool) -> BatchFft<E> {
        let n = window.len();
        assert!(supports(n), "batched FFT size {n}");
        let m = n / 2;
        let bits = m.trailing_zeros();
        let rev = |p: usize| {
            if bits == 0 {
                0
            } else {
                p.reverse_bits() >> (usize::BITS - bits)
            }
        };
        let slot: Vec<u32> = (0..n).map(|i| (2 * rev(i >> 1) + (i & 1)) as u32).collect();
        let mut wperm = vec![E::default(); n];
        for (i, &q) in slot.iter().enumerate() {
            wperm[q as usize] = E::from_f64(window[i]);
        }
        let tw64 = dft_twiddles(n);
        let tw: Vec<[E; 2]> = tw64
            .chunks_exact(2)
            .map(|c| [E::from_f64(c[0]), E::from_f64(c[1])])
            .collect();
        let first_radix2 = bits % 2 == 1;
        let mut stages = Vec::new();
        let mut h = if first_radix2 { 2 } else { 4 };
        while 4 * h <= m {
            // w_{4h}^j = w_n^{j · n / 4h}
            let step = n / (4 * h);
            let mut t = Vec::with_capacity(6 * h);
            for j in 0..h {
                for r in 1..=3 {
                    let [re, im] = tw[(r * j * step) % n];
                    t.extend([re, im]);
                }
            }
            stages.push(Stage { h, tw: t });
            h *= 4;
        }
        let twice = |v: &[f32]| v.iter().map(|&x| E::from_f64(2.0 * x as f64)).collect();
        BatchFft {
            n,
            m,
            slot,
            wperm,
            first_radix2,
            stages,
            split_tw: tw[..=m / 2].to_vec(),
            dc_remedy: dc.is_some(),
            dc_re: dc.map_or(vec![], |d| twice(d.0)),
            dc_im: dc.map_or(vec![], |d| twice(d.1)),
            magnitude,
        }
    }

    /// The exact factor the filterbank weights take so that they undo the split's scale.
    pub fn weight_scale(&self) -> f32 {
        if self.magnitude { 0.5 } else { 0.25 }
    }

    /// Elements of the transform buffer for `lanes`-wide vectors.
    pub fn buffer_len(&self, lanes: usize) -> usize {
        2 * self.m * lanes
    }

    /// Transforms `LANES` frames: gathers `rows[j][0..n]` into `buf`, transforms and
    /// writes `4·|X[k]|²` (or `2·|X[k]|`) of frame `j`, rounded to f32, to
    /// `power[k · stride + j]`.
    ///
    /// # Safety
    /// `rows` holds `LANES` pointers each readable for `n` values; `buf` is writable for
    /// [`buffer_len`](Self::buffer_len) elements, `power` for `n/2 + 1` rows of `stride`
    /// floats (`stride ≥ LANES`).
    #[inline(always)]
    pub unsafe fn run<S: Lanes<E = E>>(
        &self,
        s: S,
        rows: &[*const f32],
        buf: *mut E,
        power: *mut f32,
        stride: usize,
    ) {
        // SAFETY: the caller's contract covers the gather's reads and writes.
        let sum = unsafe { s.gather(rows, self.n, &self.slot, buf) };
        let c = if self.dc_remedy {
            s.mul(sum, s.splat(E::from_f64(1.0 / self.n as f64)))
        } else {
            s.splat(E::default())
        };
        // SAFETY: `buf` holds the 2m vectors every stage touches; `power` m + 1.
        unsafe {
            if self.first_radix2 {
                self.first_stage_radix2(s, buf, c);
            } else {
                self.first_stage_radix4(s, buf, c);
            }
            for st in &self.stages {
                radix4_stage(s, st, self.m, buf);
            }
            self.split(s, buf, c, power, stride);
        }
    }

    /// Loads vector `q` of the gathered frames minus `c`, times the window.
    #[inline(always)]
    unsafe fn windowed<S: Lanes<E = E>>(&self, s: S, buf: *mut E, q: usize, c: S::V) -> S::V {
        let l = S::LANES;
        // SAFETY: q < 2m (caller), so the vector is inside `buf` and `wperm`.
        unsafe {
            let w = s.splat(*self.wperm.get_unchecked(q));
            let x = s.load(buf.add(q * l));
            if self.dc_remedy {
                s.mul(s.sub(x, c), w)
            } else {
                s.mul(x, w)
            }
        }
    }

    #[inline(always)]
    unsafe fn first_stage_radix2<S: Lanes<E = E>>(&self, s: S, buf: *mut E, c: S::V) {
        let l = S::LANES;
        for p in (0..self.m).step_by(2) {
            // SAFETY: p + 1 < m; the vectors 2p .. 2p + 4 are inside `buf`.
            unsafe {
                let (ar, ai) = (
                    self.windowed(s, buf, 2 * p, c),
                    self.windowed(s, buf, 2 * p + 1, c),
                );
                let (br, bi) = (
                    self.windowed(s, buf, 2 * p + 2, c),
                    self.windowed(s, buf, 2 * p + 3, c),
                );
                s.store(buf.add(2 * p * l), s.add(ar, br));
                s.store(buf.add((2 * p + 1) * l), s.add(ai, bi));
                s.store(buf.add((2 * p + 2) * l), s.sub(ar, br));
                s.store(buf.add((2 * p + 3) * l), s.sub(ai, bi));
            }
        }
    }

    #[inline(always)]
    unsafe fn first_stage_radix4<S: Lanes<E = E>>(&self, s: S, buf: *mut E, c: S::V) {
        let l = S::LANES;
        for p in (0..self.m).step_by(4) {
            // SAFETY: p + 3 < m; the vectors 2p .. 2p + 8 are inside `buf`.
            unsafe {
                let x = |r: usize| {
                    (
                        self.windowed(s, buf, 2 * (p + r), c),
                        self.windowed(s, buf, 2 * (p + r) + 1, c),
                    )
                };
                let x = [x(0), x(1), x(2), x(3)];
                // Block r of the bit-reversed input holds residue (0, 2, 1, 3)[r].
                let out = butterfly4(s, x[0], x[2], x[1], x[3]);
                for (r, (re, im)) in out.into_iter().enumerate() {
                    s.store(buf.add(2 * (p + r) * l), re);
                    s.store(buf.add((2 * (p + r) + 1) * l), im);
                }
            }
        }
    }

    /// Splits the packed spectrum `Z` into the real frames' `2·X[k]`, adds `2c·W[k]`
    /// (the DC remedy), and writes power or magnitude for `k = 0 ..= m`.
    #[inline(always)]
    unsafe fn split<S: Lanes<E = E>>(
        &self,
        s: S,
        buf: *mut E,
        c: S::V,
        power: *mut f32,
        stride: usize,
    ) {
        let l = S::LANES;
        let m = self.m;
        let dc = self.dc_re.len();
        let out = |x: (S::V, S::V)| {
            let p = s.mul_add(x.0, x.0, s.mul(x.1, x.1));
            if self.magnitude { s.sqrt(p) } else { p }
        };
        let add_dc = |x: (S::V, S::V), k: usize| {
            if k < dc {
                // SAFETY: k < dc = dc_re.len() = dc_im.len().
                let (wr, wi) = unsafe {
                    (
                        s.splat(*self.dc_re.get_unchecked(k)),
                        s.splat(*self.dc_im.get_unchecked(k)),
                    )
                };
                (s.mul_add(c, wr, x.0), s.mul_add(c, wi, x.1))
            } else {
                x
            }
        };
        for k in 0..=m / 2 {
            let mk = (m - k) % m;
            // SAFETY: k, mk < m: vectors inside `buf`; bins k, m - k ≤ m inside `power`.
            unsafe {
                let (a, b) = (s.load(buf.add(2 * k * l)), s.load(buf.add((2 * k + 1) * l)));
                let (cc, d) = (
                    s.load(buf.add(2 * mk * l)),
                    s.load(buf.add((2 * mk + 1) * l)),
                );
                let [wr, wi] = *self.split_tw.get_unchecked(k);
                let (wr, wi) = (s.splat(wr), s.splat(wi));
                // E' = Z[k] + conj Z[m-k]; O' = -i (Z[k] - conj Z[m-k]); X' = E' ± w^k O'.
                let (s1, s2) = (s.add(a, cc), s.sub(b, d));
                let (o_re, o_im) = (s.add(b, d), s.sub(cc, a));
                let tr = s.mul_sub(wr, o_re, s.mul(wi, o_im));
                let ti = s.mul_add(wr, o_im, s.mul(wi, o_re));
                let xk = add_dc((s.add(s1, tr), s.add(s2, ti)), k);
                let xmk = add_dc((s.sub(s1, tr), s.sub(ti, s2)), m - k);
                s.store_f32(power.add(k * stride), out(xk));
                s.store_f32(power.add((m - k) * stride), out(xmk));
            }
        }
    }
}

/// `x · w` for complex vectors.
#[inline(always)]
fn cmul<S: Lanes>(s: S, x: (S::V, S::V), wr: S::V, wi: S::V) -> (S::V, S::V) {
    (
        s.mul_sub(x.0, wr, s.mul(x.1, wi)),
        s.mul_add(x.0, wi, s.mul(x.1, wr)),
    )
}

/// The forward radix-4 butterfly of residues `t0..t3` (already twiddled):
/// `U[q] = Σ_r t_r · (-i)^{rq}`.
#[inline(always)]
fn butterfly4<S: Lanes>(
    s: S,
    t0: (S::V, S::V),
    t1: (S::V, S::V),
    t2: (S::V, S::V),
    t3: (S::V, S::V),
) -> [(S::V, S::V); 4] {
    let a = (s.add(t0.0, t2.0), s.add(t0.1, t2.1));
    let b = (s.sub(t0.0, t2.0), s.sub(t0.1, t2.1));
    let c = (s.add(t1.0, t3.0), s.add(t1.1, t3.1));
    let d = (s.sub(t1.0, t3.0), s.sub(t1.1, t3.1));
    [
        (s.add(a.0, c.0), s.add(a.1, c.1)),
        // b - i d
        (s.add(b.0, d.1), s.sub(b.1, d.0)),
        (s.sub(a.0, c.0), s.sub(a.1, c.1)),
        // b + i d
        (s.sub(b.0, d.1), s.add(b.1, d.0)),
    ]
}

/// One in-place radix-4 decimation-in-time stage over `m` complex positions: blocks
/// `B0..B3` of span `h` (DFTs of residues 0, 2, 1, 3 of their subsequence) become one
/// DFT of size `4h`.
///
/// # Safety
/// `buf` holds `2m` vectors of `LANES` floats.
#[inline(always)]
unsafe fn radix4_stage<S: Lanes>(s: S, st: &Stage<S::E>, m: usize, buf: *mut S::E) {
    let l = S::LANES;
    let h = st.h;
    let ld = |p: usize| {
        // SAFETY: p < m (the loops below), so the vector pair is inside `buf`.
        unsafe { (s.load(buf.add(2 * p * l)), s.load(buf.add((2 * p + 1) * l))) }
    };
    let st_ = |p: usize, x: (S::V, S::V)| {
        // SAFETY: as `ld`.
        unsafe {
            s.store(buf.add(2 * p * l), x.0);
            s.store(buf.add((2 * p + 1) * l), x.1);
        }
    };
    for g in (0..m).step_by(4 * h) {
        for j in 0..h {
            // SAFETY: j < h, and `tw` holds 6 floats per j.
            let w = unsafe { st.tw.as_ptr().add(6 * j) };
            let tw = |r: usize| {
                // SAFETY: r < 6.
                unsafe { s.splat(*w.add(r)) }
            };
            let p0 = g + j;
            let t0 = ld(p0);
            let t1 = cmul(s, ld(p0 + 2 * h), tw(0), tw(1));
            let t2 = cmul(s, ld(p0 + h), tw(2), tw(3));
            let t3 = cmul(s, ld(p0 + 3 * h), tw(4), tw(5));
            let out = butterfly4(s, t0, t1, t2, t3);
            for (q, x) in out.into_iter().enumerate() {
                st_(p0 + q * h, x);
            }
        }
    }
}
