//! A group of items that mixup mixes (a pair, or a batch's one three-cycle), widened from
//! their stored f16 runs, mapped (normalised, given a gain) and mixed in one pass: each
//! output value is stored once, as `w·u + (1 − w)·v` of a member's and its partner's mapped
//! values, instead of each member being widened into the batch and a second pass loading
//! and storing all of them again.
//!
//! The separate pass cost mixup 40–46% of a bucket epoch; one kernel costs what widening
//! the members apart does (`examples/mix_bench.rs`: 0.29 against 0.30 ns a value, apart and
//! mixed after 0.42; docs/bench-log/journal.md, 2026-11-29). Each step is rounded as the
//! steps done one after another are (no FMA), so the values are the same bits. Without
//! maps (no normalisation, no gain) the kernel skips the map's three steps a value, as the
//! loop for one item does: with them it cost mixing crops 8% of an epoch's CPU time. With
//! gains alone (no normalisation) it takes one step of the three, the add, and a member's
//! one gain for every run is found once, not each run: a gain cost the kernel +20% a value
//! over no map with all three steps each run, +3–4% so (`examples/mix_bench.rs`: 0.250,
//! then 0.213–0.220, against 0.206–0.212 ns).

use crate::widen::{Finite, RowMap};

/// One member of a mixed group's runs: run `r` of its stored f16 values starts at value
/// `r·stride` of `src` (a stride of 0 reads one run for every row: a run of zeros stands
/// for padding), is mapped by `maps[r]` (empty: kept as widened) and mixed with weight
/// `weight` (its partner's values weighing `1 − weight`).
#[derive(Debug, Clone, Copy)]
pub struct Member<'a> {
    /// The stored little-endian f16 bytes (two a value, any alignment).
    pub src: &'a [u8],
    /// Values from one run's start to the next's in `src`.
    pub stride: usize,
    /// Each run's map, one for every run, or none (every run kept).
    pub maps: &'a [RowMap],
    /// The member's own share of its output (mixup's λ).
    pub weight: f32,
    /// Each column's keep bits (`u32::MAX` kept, `0` zeroed in every run: SpecAugment's
    /// time masks, applied as the output is stored instead of in a pass after), at least
    /// `len` rounded up to eight of them; empty: every value kept. The members of a group
    /// have keep bits all or none.
    pub keep: &'a [u32],
    /// Where each run goes on further in `src` (a member whose block of frames ends within
    /// the run: its next block's rows are further on), or none.
    pub jump: Option<Jump>,
}

/// A jump within each run of a [`Member`]: its values from the run's `at`-th on lie
/// `skip` values further in the source (value `i ≥ at` of run `r` at `r·stride + i +
/// skip`). A group's runs then end only where one member's block does, not where any
/// member's does: crops start at any frame, so their members' blocks are out of step,
/// and runs cut at every member's block boundary were half as long (10% of a mixed crop
/// epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jump {
    /// The first value of each run that lies further on.
    pub at: usize,
    /// How much further, in values.
    pub skip: usize,
}

/// The runs to write: `rows` runs of `len` values each, `dst_stride` apart in each output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixRuns {
    /// Runs per member.
    pub rows: usize,
    /// Values in each run.
    pub len: usize,
    /// Values from one run's start to the next's in each output.
    pub dst_stride: usize,
    /// Values after each run in the outputs that may be written with anything (the next
    /// run, written after it, or what the caller writes after): a run's last 1–7 values
    /// are then stored as a whole eight-lane vector rather than through a mask, which is
    /// slow on some CPUs (the masked stores were a fifth of the kernel on crops here).
    pub slack: usize,
    /// Whether each member's source is asked for [`PREFETCH_BYTES`](crate::widen::PREFETCH_BYTES)
    /// ahead of each run: a whole clip's blocks, whose pairs the hardware prefetcher
    /// follows badly (mixed buckets +21–24% a value over widening apart, +5–9% with it),
    /// but not fixed-length items' long runs, which it follows (mixed items +8% of CPU
    /// time with it).
    pub prefetch: bool,
}

impl<'a> Member<'a> {
    /// Panics unless every run lies within `src` and the maps are none, one, or one a row.
    fn check(&self, runs: MixRuns) {
        if runs.rows == 0 || runs.len == 0 {
            return;
        }
        assert!(
            2 * ((runs.rows - 1) * self.stride + runs.len + self.skip(runs.len)) <= self.src.len(),
            "runs {runs:?} of stride {} (jump {:?}) beyond a source of {} bytes",
            self.stride,
            self.jump,
            self.src.len()
        );
        assert!(
            self.maps.len() <= 1 || self.maps.len() == runs.rows,
            "{} maps for {} runs",
            self.maps.len(),
            runs.rows
        );
        assert!(
            self.keep.is_empty() || self.keep.len() >= runs.len.next_multiple_of(8),
            "{} keep bits for runs of {}",
            self.keep.len(),
            runs.len
        );
    }

    /// Value `v` of column `i` as stored: `+0` where the column is masked.
    #[inline(always)]
    fn kept(&self, i: usize, v: f32) -> f32 {
        match self.keep.get(i) {
            Some(0) => 0.0,
            _ => v,
        }
    }

    /// How far a run of `len` values reaches past its `len` values in the source: its
    /// jump's skip if the jump lies within it.
    fn skip(&self, len: usize) -> usize {
        self.jump.filter(|j| j.at < len).map_or(0, |j| j.skip)
    }

    /// The stored bytes of run `r` of `len` values (with what it jumps over).
    fn run(&self, r: usize, len: usize) -> &'a [u8] {
        &self.src[2 * r * self.stride..2 * (r * self.stride + len + self.skip(len))]
    }

    /// Where value `i` of a run lies from the run's start.
    #[inline(always)]
    fn place(&self, i: usize) -> usize {
        match self.jump {
            Some(j) if i >= j.at => i + j.skip,
            _ => i,
        }
    }

    /// Run `r`'s map as `(shift, scale, add)` ([`RowMap::affine`]: the same bits as
    /// [`RowMap::apply`]).
    fn affine(&self, r: usize) -> (f32, f32, f32) {
        self.map(r).affine()
    }

    /// Run `r`'s map: its own, the one for every run, or none ([`RowMap::Keep`]).
    pub(crate) fn map(&self, r: usize) -> RowMap {
        match self.maps {
            [one] => *one,
            maps => maps.get(r).copied().unwrap_or(RowMap::Keep),
        }
    }
}

/// Widens, maps and mixes a group's runs: member `k`'s output is
/// `w_k·m_k + (1 − w_k)·m_(k+1 mod N)` (a pair: each with the other; three: each with the
/// next), each `m` the member's widened value mapped by its run's map; a member of weight
/// 1 (or alone) is its `m` exactly (`1·m + 0·m'` would turn a −0 into +0). Unmixed items
/// read together so go faster than one by one: two streams of loads and stores in flight. Returns each
/// member's verdict: `stored` whether every value read was finite, `normalised` whether
/// every value was finite after its map's normalising step (its value as stored where the
/// map does not normalise). Panics if a run (with its slack) lies outside a source or an
/// output.
pub fn group_mixed_into<const N: usize>(
    members: [Member<'_>; N],
    mut dst: [&mut [f32]; N],
    runs: MixRuns,
) -> [Finite; N] {
    for m in &members {
        m.check(runs);
    }
    let keeps = members.iter().filter(|m| !m.keep.is_empty()).count();
    assert!(
        keeps == 0 || keeps == N,
        "keep bits for {keeps} of {N} members"
    );
    if runs.rows > 0 && runs.len > 0 {
        // A slack may reach into the next run (written after it), not a run itself.
        assert!(
            runs.len <= runs.dst_stride || runs.rows == 1,
            "runs {runs:?} that overlap"
        );
        let need = (runs.rows - 1) * runs.dst_stride + runs.len + runs.slack;
        for d in &dst {
            assert!(
                need <= d.len(),
                "runs {runs:?} beyond an output of {} values",
                d.len()
            );
        }
    }
    #[cfg(target_arch = "x86_64")]
    if crate::widen::has_f16c() {
        let out = dst.each_mut().map(|d| &mut **d);
        // One kernel for each case, so that no test of it is in the loop (a test of each
        // member's weight there cost mixing crops 4%).
        let alone = N == 1 || members.iter().any(|m| m.weight == 1.0);
        let keep = keeps > 0;
        // SAFETY: the CPU has AVX and F16C (checked just above); every run lies within
        // its source and output, and every member's keep bits (if any) cover its runs
        // rounded up to eight (checked above).
        let fine = unsafe {
            use x86::{ADDED, AFFINE, KEPT, group_mixed_into as mix};
            match (map_kind(&members), keep, alone) {
                (KEPT, false, false) => mix::<N, KEPT, false, false>(members, out, runs),
                (KEPT, false, true) => mix::<N, KEPT, false, true>(members, out, runs),
                (KEPT, true, false) => mix::<N, KEPT, true, false>(members, out, runs),
                (KEPT, true, true) => mix::<N, KEPT, true, true>(members, out, runs),
                (ADDED, false, false) => mix::<N, ADDED, false, false>(members, out, runs),
                (ADDED, false, true) => mix::<N, ADDED, false, true>(members, out, runs),
                (ADDED, true, false) => mix::<N, ADDED, true, false>(members, out, runs),
                (ADDED, true, true) => mix::<N, ADDED, true, true>(members, out, runs),
                (_, false, false) => mix::<N, AFFINE, false, false>(members, out, runs),
                (_, false, true) => mix::<N, AFFINE, false, true>(members, out, runs),
                (_, true, false) => mix::<N, AFFINE, true, false>(members, out, runs),
                (_, true, true) => mix::<N, AFFINE, true, true>(members, out, runs),
            }
        };
        if fine {
            return [Finite::default(); N];
        }
        // Something is not finite (or a tail's unused lane overflowed): the loop value
        // by value writes the same bits and says which member, and whether as stored.
    }
    group_mixed_portable(members, dst, runs)
}

/// The least of the kernel's map steps that give every member's maps their bits: none
/// where no member has maps (`RowMap::Keep` maps `x` to `x` exactly), the add alone where
/// none normalises (gains only: `(x − 0)·1 + d` is `x + d` exactly), else all three.
#[cfg(target_arch = "x86_64")]
fn map_kind(members: &[Member<'_>]) -> u8 {
    let normalises = |m: &Member<'_>| m.maps.iter().any(|r| matches!(r, RowMap::Normalise { .. }));
    match (
        members.iter().any(|m| !m.maps.is_empty()),
        members.iter().any(normalises),
    ) {
        (false, _) => x86::KEPT,
        (true, false) => x86::ADDED,
        (true, true) => x86::AFFINE,
    }
}

/// [`group_mixed_into`] one value at a time (for CPUs without F16C, and the reference the
/// tests compare the kernel with); writes no slack. A masked column's value is `+0`.
pub fn group_mixed_portable<const N: usize>(
    members: [Member<'_>; N],
    dst: [&mut [f32]; N],
    runs: MixRuns,
) -> [Finite; N] {
    let mut found = [Finite::default(); N];
    let mut m = [0f32; N];
    for r in 0..runs.rows {
        let maps = members.map(|x| x.affine(r));
        let srcs = members.map(|x| x.run(r, runs.len));
        let at = r * runs.dst_stride;
        for i in 0..runs.len {
            for k in 0..N {
                m[k] = widened(srcs[k], members[k].place(i), maps[k], &mut found[k]);
            }
            for k in 0..N {
                let (w, partner) = (members[k].weight, m[(k + 1) % N]);
                let out = match N {
                    1 => m[k],
                    _ => mixed(w, m[k], partner),
                };
                // A mixture that overflows from finite values is its own member's.
                found[k].normalised &=
                    out.is_finite() || !(m[k].is_finite() && partner.is_finite());
                dst[k][at + i] = members[k].kept(i, out);
            }
        }
    }
    found
}

/// `w·u + (1 − w)·v`, or `u` itself for a weight of 1 (an item left unmixed keeps its
/// bits: `1·u + 0·v` would turn a −0 into +0): the value by value rule of the kernel, and
/// of mixing after reading (`augment`).
#[inline(always)]
pub(crate) fn mixed(w: f32, u: f32, v: f32) -> f32 {
    if w == 1.0 { u } else { w * u + (1.0 - w) * v }
}

/// Value `i` of a run widened and mapped by `(shift, scale, add)`, its verdicts noted.
#[inline(always)]
fn widened(run: &[u8], i: usize, (shift, scale, add): (f32, f32, f32), found: &mut Finite) -> f32 {
    let bits = u16::from_le_bytes([run[2 * i], run[2 * i + 1]]);
    found.stored &= bits & 0x7c00 != 0x7c00;
    let z = (half::f16::from_bits(bits).to_f32() - shift) * scale + add;
    found.normalised &= z.is_finite();
    z
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m256, __m256i, _mm_blendv_epi8, _mm256_add_ps, _mm256_and_ps, _mm256_castps_si256,
        _mm256_cvtph_ps, _mm256_maskstore_ps, _mm256_mul_ps, _mm256_or_ps, _mm256_set1_ps,
        _mm256_setzero_ps, _mm256_storeu_ps, _mm256_sub_ps, _mm256_testz_si256,
    };

    use super::{Member, MixRuns};
    use crate::widen::PREFETCH_BYTES as AHEAD;

    /// Lanes `0..k` all ones, the rest zero, for `k` in `0..=8`: `LANES[8 - k..16 - k]`.
    const LANES: [u32; 16] = [
        u32::MAX,
        u32::MAX,
        u32::MAX,
        u32::MAX,
        u32::MAX,
        u32::MAX,
        u32::MAX,
        u32::MAX,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ];

    /// A run's map in registers.
    #[derive(Clone, Copy)]
    struct Affine {
        shift: __m256,
        scale: __m256,
        add: __m256,
    }

    /// The kernel's map steps ([`super::map_kind`]): none (every value kept as widened).
    pub(super) const KEPT: u8 = 0;
    /// The add alone (every map a gain, or none).
    pub(super) const ADDED: u8 = 1;
    /// All three: `(x − shift)·scale + add`.
    pub(super) const AFFINE: u8 = 2;

    /// Eight stored values widened and mapped by `MAP`'s steps ([`KEPT`], [`ADDED`] or
    /// [`AFFINE`]); judged where they are stored, as outputs ([`judged`]).
    #[target_feature(enable = "avx,f16c")]
    #[inline]
    fn widen_map<const MAP: u8>(h: [u8; 16], m: Affine) -> __m256 {
        let x = _mm256_cvtph_ps(bytemuck::cast(h));
        match MAP {
            KEPT => x,
            ADDED => _mm256_add_ps(x, m.add),
            _ => _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(x, m.shift), m.scale), m.add),
        }
    }

    /// `seen` with `y − y` ORed in: unchanged where every lane of `y` is finite, a NaN
    /// lane where one is not.
    #[target_feature(enable = "avx")]
    #[inline]
    fn judged(seen: __m256, y: __m256) -> __m256 {
        _mm256_or_ps(seen, _mm256_sub_ps(y, y))
    }

    /// Eight stored values, the first `n` (`1..=7`) of `a` and the rest of `b`'s.
    #[target_feature(enable = "avx")]
    #[inline]
    fn joined(a: [u8; 16], b: [u8; 16], n: usize) -> [u8; 16] {
        let mask: [u8; 16] = FIRST_BYTES[16 - 2 * n..32 - 2 * n]
            .try_into()
            .expect("sixteen bytes");
        bytemuck::cast(_mm_blendv_epi8(
            bytemuck::cast(b),
            bytemuck::cast(a),
            bytemuck::cast(mask),
        ))
    }

    /// Bytes `0..k` all ones, the rest zero, for `k` in `0..=16`: `FIRST_BYTES[16 - k..32 - k]`.
    const FIRST_BYTES: [u8; 32] = {
        let mut b = [0u8; 32];
        let mut i = 0;
        while i < 16 {
            b[i] = 0xff;
            i += 1;
        }
        b
    };

    /// [`super::group_mixed_into`] with F16C, eight values of each member a step (a step
    /// across a member's jump joined from the two loads either side of it), each
    /// run's last 0–7 loaded whole where the source goes on (else through a zeroed buffer)
    /// and stored whole into the run's slack (else through a mask); with `KEEP`, each
    /// member's mixture ANDed with its keep bits before it is stored (a masked value is
    /// `+0`, after it was judged); with `ALONE` (only then), a member of weight 1 (or
    /// alone) stored as mapped; each value mapped by `MAP`'s steps ([`widen_map`]); with
    /// `runs.prefetch`, each member's source asked for [`PREFETCH_BYTES`](AHEAD) ahead of
    /// the run.
    /// Returns whether every output value (and every lane past a tail) is finite, judged
    /// before its mask: a member's stored value that is not finite makes its mixtures not
    /// finite (`0·∞` is a NaN), and so does a map, a gain or a mixing that overflows; the
    /// verdicts per member are left to the caller, which needs them only where this says
    /// no.
    ///
    /// # Safety
    /// Every run of the sources and outputs (and its slack) lies within them
    /// ([`Member::check`] and the output check of the caller), with `KEEP` every member's
    /// keep bits cover its runs rounded up to eight ([`Member::check`]), and the CPU has
    /// AVX and F16C.
    #[target_feature(enable = "avx,f16c")]
    pub(super) unsafe fn group_mixed_into<
        const N: usize,
        const MAP: u8,
        const KEEP: bool,
        const ALONE: bool,
    >(
        members: [Member<'_>; N],
        mut dst: [&mut [f32]; N],
        runs: MixRuns,
    ) -> bool {
        let mut seen = _mm256_setzero_ps();
        let (len, k) = (runs.len, runs.len % 8);
        let first_k: __m256i =
            bytemuck::cast::<[u32; 8], _>(LANES[8 - k..16 - k].try_into().expect("eight lanes"));
        let set = |v: f32| _mm256_set1_ps(v);
        let w = members.map(|m| set(m.weight));
        let c = members.map(|m| set(1.0 - m.weight));
        let alone = members.map(|m| N == 1 || m.weight == 1.0);
        // Member `q`'s output from every member's mapped values: `w·m_q + (1 − w)·m_(q+1)`
        // (a member of weight 1, or alone: its mapped values; `ALONE`: some member is).
        let mixture = |mapped: &[__m256; N], q: usize| {
            if ALONE && alone[q] {
                return mapped[q];
            }
            _mm256_add_ps(
                _mm256_mul_ps(w[q], mapped[q]),
                _mm256_mul_ps(c[q], mapped[(q + 1) % N]),
            )
        };
        // Member `q`'s output, judged: what is stored is what is judged, so a value made
        // not finite by any step (its map, its gain, the mixing) is seen, and a stored one
        // not finite in either member (judging only the members' values, or only some
        // mixtures, let a gain or a mixing that overflows through: helper-24's attack).
        let mixed = |mapped: &[__m256; N], q: usize, seen: &mut __m256| {
            let a = mixture(mapped, q);
            *seen = judged(*seen, a);
            a
        };
        let keeps = members.map(|m| m.keep.as_ptr());
        // Member `q`'s eight values from column `i` as stored: masked columns zeroed.
        let kept = |a: __m256, q: usize, i: usize| match KEEP {
            true => {
                // SAFETY: the callers' `i + 8` is at most the run's length rounded up to
                // eight, which the member's keep bits cover (`Member::check`).
                let bits = unsafe { keeps[q].add(i).cast::<[u32; 8]>().read_unaligned() };
                _mm256_and_ps(a, bytemuck::cast(bits))
            }
            false => a,
        };
        // Each member's jump as `(at, skip)`: none lies at no value of a run.
        let jumps = members.map(|m| m.jump.map_or((usize::MAX, 0), |j| (j.at, j.skip)));
        let mut mapped = [_mm256_setzero_ps(); N];
        // Each member's map of run `r` in registers; found once where no member has a map
        // a run (none, or one for every run: a gain alone), not each run (mixing with a
        // gain alone: 0.213–0.220 against 0.244–0.250 ns a value in `examples/mix_bench.rs`).
        let maps_of = |r: usize| {
            members.map(|m| {
                let (shift, scale, add) = match MAP {
                    KEPT => (0.0, 1.0, -0.0),
                    _ => m.affine(r),
                };
                Affine {
                    shift: set(shift),
                    scale: set(scale),
                    add: set(add),
                }
            })
        };
        let per_row = MAP != KEPT && members.iter().any(|m| m.maps.len() > 1);
        let mut maps = maps_of(0);
        for r in 0..runs.rows {
            if per_row && r > 0 {
                maps = maps_of(r);
            }
            if runs.prefetch {
                for (m, &(at, skip)) in members.iter().zip(&jumps) {
                    crate::widen::prefetch(m.src, 2 * r * m.stride, AHEAD);
                    // A member's values past its jump lie a block further on: ahead of
                    // them too (crops' pairs: the kernel's samples −7% to −11%).
                    if at < len {
                        crate::widen::prefetch(m.src, 2 * (r * m.stride + at + skip), AHEAD);
                    }
                }
            }
            let srcs = members.map(|m| m.src.as_ptr().wrapping_add(2 * r * m.stride));
            let at = r * runs.dst_stride;
            let outs = dst.each_mut().map(|d| d.as_mut_ptr().wrapping_add(at));
            // SAFETY: the caller checked that run `r` of each source lies within it
            // (`2·(r·stride + len)` bytes, and its jump's `skip` more where the jump lies
            // within the run: a step of eight before the jump is loaded from before it,
            // one after from after it, one across it from both, each eight values within
            // the run but for a run's last step, loaded only where sixteen bytes lie within
            // the source) and of each output within it with its slack
            // (`r·dst_stride + len + slack` values); the loads are unaligned, the outputs
            // distinct slices.
            unsafe {
                let mut i = 0;
                while i + 8 <= len {
                    for q in 0..N {
                        let load =
                            |v: usize| srcs[q].add(2 * v).cast::<[u8; 16]>().read_unaligned();
                        let h = match jumps[q] {
                            (at, _) if i + 8 <= at => load(i),
                            (at, skip) if i >= at => load(i + skip),
                            (at, skip) => joined(load(i), load(i + skip), at - i),
                        };
                        mapped[q] = widen_map::<MAP>(h, maps[q]);
                    }
                    for (q, out) in outs.iter().enumerate() {
                        _mm256_storeu_ps(out.add(i), kept(mixed(&mapped, q, &mut seen), q, i));
                    }
                    i += 8;
                }
                if k > 0 {
                    // The run's last k values: where sixteen bytes from them lie within
                    // the source, loaded as they are (the lanes past the run are the
                    // next values stored: finite, and at worst a false alarm that the
                    // caller's value-by-value pass settles), else through a zeroed
                    // buffer; stored whole where the slack takes the lanes past the
                    // run, else through the mask of the first k lanes.
                    for q in 0..N {
                        let m = &members[q];
                        // Values `v..v + n` of the run, loaded whole where sixteen bytes
                        // from them lie within the source.
                        let load = |v: usize, n: usize| {
                            let from = 2 * (r * m.stride + v);
                            match from + 16 <= m.src.len() {
                                true => srcs[q].add(2 * v).cast::<[u8; 16]>().read_unaligned(),
                                false => {
                                    let mut h = [0u8; 16];
                                    h[..2 * n].copy_from_slice(&m.src[from..from + 2 * n]);
                                    h
                                }
                            }
                        };
                        let h = match jumps[q] {
                            (at, _) if i + k <= at => load(i, k),
                            (at, skip) if i >= at => load(i + skip, k),
                            (at, skip) => joined(load(i, at - i), load(i + skip, k), at - i),
                        };
                        mapped[q] = widen_map::<MAP>(h, maps[q]);
                    }
                    for (q, out) in outs.iter().enumerate() {
                        let a = kept(mixed(&mapped, q, &mut seen), q, i);
                        match 8 - k <= runs.slack {
                            true => _mm256_storeu_ps(out.add(i), a),
                            false => _mm256_maskstore_ps(out.add(i), first_k, a),
                        }
                    }
                }
            }
        }
        // Every bit zero: no lane saw a NaN (of either sign).
        let seen = _mm256_castps_si256(seen);
        _mm256_testz_si256(seen, seen) == 1
    }
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::*;

    /// The loader's mixing step: `w·u + (1 − w)·v`, an item of weight 1 left as it is.
    fn unmixed_or(w: f32, u: f32, v: f32) -> f32 {
        if w == 1.0 { u } else { w * u + (1.0 - w) * v }
    }

    /// Stored f16 bytes of `values`.
    fn stored(values: &[f32]) -> Vec<u8> {
        let bits: Vec<u16> = values.iter().map(|&v| f16::from_f32(v).to_bits()).collect();
        bytes(&bits)
    }

    /// Stored bytes of f16 bit patterns (infinities and NaNs included).
    fn bytes(bits: &[u16]) -> Vec<u8> {
        bits.iter().flat_map(|b| b.to_le_bytes()).collect()
    }

    /// The loader's steps one after another: each member widened and mapped (padding: a
    /// zero, not mapped), then `a ← wx·u + (1 − wx)·v`, `b ← wy·v + (1 − wy)·u` (a member
    /// of weight 1 left as it is).
    fn apart(members: [Member<'_>; 2], zero: [bool; 2], runs: MixRuns) -> [Vec<f32>; 2] {
        let n = (runs.rows - 1) * runs.dst_stride + runs.len;
        let mut out = [vec![f32::MIN; n], vec![f32::MIN; n]];
        for r in 0..runs.rows {
            for i in 0..runs.len {
                let val = |k: usize| {
                    let m = members[k];
                    if zero[k] {
                        return 0.0;
                    }
                    // Past its jump, value `i` lies `skip` values further on.
                    let past = m.jump.filter(|j| i >= j.at).map_or(0, |j| j.skip);
                    let at = 2 * (r * m.stride + i + past);
                    let x = f16::from_bits(u16::from_le_bytes([m.src[at], m.src[at + 1]])).to_f32();
                    let map = match m.maps.len() {
                        1 => m.maps[0],
                        _ => m.maps.get(r).copied().unwrap_or(RowMap::Keep),
                    };
                    map.apply(x).0
                };
                let (u, v) = (val(0), val(1));
                let (wx, wy) = (members[0].weight, members[1].weight);
                out[0][r * runs.dst_stride + i] = unmixed_or(wx, u, v);
                out[1][r * runs.dst_stride + i] = unmixed_or(wy, v, u);
            }
        }
        out
    }

    /// Every kind of map on either side (sources ending where the last run does, so that
    /// tails are read both ways), a padding member (zeros, stride 0) on either side,
    /// weights of 1 and between, lengths with and without a tail, outputs at every
    /// alignment: the kernel and the portable loop give the bits of the steps apart, and
    /// write nothing outside the runs.
    #[test]
    fn one_pass_equals_widening_mapping_then_mixing() {
        use RowMap::{Add, Keep};
        let (rows, block, stride) = (4usize, 40usize, 45usize);
        let values: Vec<f32> = (0..rows * block + 16)
            .map(|k| ((k * 53) % 97) as f32 * 0.41 - 20.0 + if k % 13 == 0 { -0.0 } else { 0.0 })
            .collect();
        let mut signed = values.clone();
        signed[5] = -0.0;
        let (a, b) = (
            stored(&signed),
            stored(&values.iter().rev().copied().collect::<Vec<_>>()),
        );
        let zeros = vec![0u8; 2 * block];
        let maps = [
            RowMap::Keep,
            RowMap::Add(-2.5),
            RowMap::Normalise {
                shift: -3.0,
                scale: 0.2,
                add: 0.0,
            },
            RowMap::Normalise {
                shift: 1.5,
                scale: 3.0,
                add: 1.25,
            },
        ];
        let turned: Vec<RowMap> = maps.iter().rev().copied().collect();
        // Gains alone (no map normalises: the kernel's add alone), one member's kept.
        let gains = [Add(-2.5), Keep, Add(96.0), Add(-0.0)];
        let srcs: [&[u8]; 2] = [&a, &b];
        // Both members mapped (every kind of map; gains alone, one member's or both; one
        // map for every run), or neither (stored as widened).
        let (one_gain, one_norm) = ([RowMap::Add(-0.0)], [maps[3]]);
        let map_sets: [[&[RowMap]; 2]; 8] = [
            [&maps, &turned],
            [&gains, &[]],
            [&[], &gains],
            [&gains, &gains],
            [&one_gain, &[]],
            [&one_norm, &one_gain],
            [&turned, &one_norm],
            [&[], &[]],
        ];
        let cases: Vec<_> = [1usize, 7, 8, 9, 16, 23, 32, 40]
            .into_iter()
            .flat_map(|len| [(0, 0), (1, 0), (2, 5), (0, 3)].map(|(o, sl)| (len, o, sl)))
            .flat_map(|(l, o, sl)| [[1.0f32, 0.25], [0.7, 0.3], [0.0, 1.0]].map(|w| (l, o, w, sl)))
            .flat_map(|(l, o, w, sl)| {
                [[false, false], [true, false], [false, true]].map(|p| (l, o, w, p, sl))
            })
            .collect();
        let jump = |at, skip| Some(Jump { at, skip });
        // What a run of `len` reaches past its values: its jump's skip, if within it.
        let jumped = |j: Option<Jump>, len: usize| j.filter(|j| j.at < len).map_or(0, |j| j.skip);
        let jump_sets = [
            [None, None],
            [jump(3, 7), None],
            [None, jump(9, 5)],
            [jump(1, 11), jump(17, 3)],
        ];
        // Each member's runs jumping on at a value within a step of eight, within a run's
        // last values, beyond the run, or not at all.
        for (jumps, map_sets, (len, offset, w, padded, slack)) in jump_sets
            .into_iter()
            .flat_map(|j| map_sets.map(move |m| (j, m)))
            .flat_map(|(j, m)| cases.iter().map(move |&c| (j, m, c)))
        {
            let runs = MixRuns {
                rows,
                len,
                dst_stride: stride,
                slack,
                prefetch: true,
            };
            let members = [0, 1].map(|k| match padded[k] {
                true => Member {
                    src: &zeros,
                    stride: 0,
                    maps: &[],
                    weight: w[k],
                    keep: &[],
                    jump: None,
                },
                false => Member {
                    src: &srcs[k][..2 * ((rows - 1) * block + len + jumped(jumps[k], len))],
                    stride: block,
                    maps: map_sets[k],
                    weight: w[k],
                    keep: &[],
                    jump: jumps[k],
                },
            });
            let mapped = !map_sets[0].is_empty();
            let case = format!(
                "len {len}, offset {offset}, weights {w:?}, padded {padded:?}, slack {slack}, mapped {mapped}, jumps {jumps:?}"
            );
            let mut want = apart(members, padded, runs);
            let n = want[0].len() + slack;
            // The values a run's slack may be written with are not compared.
            let kept = |v: &[f32]| {
                (v.iter().enumerate())
                    .filter(|(p, _)| !(len..len + slack).contains(&(p % stride)))
                    .map(|(_, x)| x.to_bits())
                    .collect::<Vec<_>>()
            };
            for want in &mut want {
                want.resize(n, f32::MIN);
            }
            for which in ["kernel", "portable"] {
                let (mut x, mut y) = (vec![f32::MIN; n + offset], vec![f32::MIN; n + offset]);
                let out = [&mut x[offset..], &mut y[offset..]];
                let found = match which {
                    "kernel" => group_mixed_into(members, out, runs),
                    _ => group_mixed_portable(members, out, runs),
                };
                assert_eq!(kept(&x[offset..]), kept(&want[0]), "{which}: {case}");
                assert_eq!(kept(&y[offset..]), kept(&want[1]), "{which}: {case}");
                assert!(
                    x[..offset]
                        .iter()
                        .chain(&y[..offset])
                        .all(|&v| v == f32::MIN)
                );
                assert_eq!(found, [Finite::default(); 2], "{which}: {case}");
            }
        }
    }

    /// A three-cycle (each member with the next: `x` with `y`, `y` with `z`, `z` with
    /// `x`), a padding member in each place, lengths with and without a tail, with and
    /// without slack: the bits of widening, mapping, then mixing as the loader's
    /// three-cycle does, from the kernel and the portable loop.
    #[test]
    fn a_three_cycle_in_one_pass_equals_its_steps_apart() {
        let (rows, block, stride) = (3usize, 40usize, 48usize);
        let stores: Vec<Vec<u8>> = (0..3)
            .map(|m| {
                let v: Vec<f32> = (0..rows * block)
                    .map(|k| ((k * (31 + 7 * m)) % 89) as f32 * 0.53 - 21.0)
                    .collect();
                stored(&v)
            })
            .collect();
        let zeros = vec![0u8; 2 * block];
        let maps = [
            RowMap::Normalise {
                shift: -3.0,
                scale: 0.2,
                add: 0.5,
            },
            RowMap::Add(1.5),
            RowMap::Keep,
        ];
        let weights = [0.8f32, 0.35, 0.6];
        for (len, slack, padded) in [1usize, 8, 13, 23, 40]
            .into_iter()
            .flat_map(|l| [0, 7].map(|sl| (l, sl)))
            .flat_map(|(l, sl)| [None, Some(0), Some(1), Some(2)].map(|p| (l, sl, p)))
        {
            if len + slack > stride {
                continue;
            }
            let runs = MixRuns {
                rows,
                len,
                dst_stride: stride,
                slack,
                prefetch: true,
            };
            let members: [Member<'_>; 3] = std::array::from_fn(|k| match padded == Some(k) {
                true => Member {
                    src: &zeros,
                    stride: 0,
                    maps: &[],
                    weight: weights[k],
                    keep: &[],
                    jump: None,
                },
                false => Member {
                    src: &stores[k][..2 * ((rows - 1) * block + len)],
                    stride: block,
                    maps: &maps,
                    weight: weights[k],
                    keep: &[],
                    jump: None,
                },
            });
            let n = (rows - 1) * stride + len + slack;
            let mut want = [vec![f32::MIN; n], vec![f32::MIN; n], vec![f32::MIN; n]];
            for r in 0..rows {
                for i in 0..len {
                    let v: [f32; 3] = std::array::from_fn(|k| match padded == Some(k) {
                        true => 0.0,
                        false => {
                            let b = &stores[k][2 * (r * block + i)..];
                            maps[r]
                                .apply(f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
                                .0
                        }
                    });
                    let (wx, wy, wz) = (weights[0], weights[1], weights[2]);
                    want[0][r * stride + i] = unmixed_or(wx, v[0], v[1]);
                    want[1][r * stride + i] = unmixed_or(wy, v[1], v[2]);
                    want[2][r * stride + i] = unmixed_or(wz, v[2], v[0]);
                }
            }
            let kept = |v: &[f32]| {
                (v.iter().enumerate())
                    .filter(|(p, _)| !(len..len + slack).contains(&(p % stride)))
                    .map(|(_, x)| x.to_bits())
                    .collect::<Vec<_>>()
            };
            for which in ["kernel", "portable"] {
                let mut got = [vec![f32::MIN; n], vec![f32::MIN; n], vec![f32::MIN; n]];
                let out = got.each_mut().map(|g| &mut g[..]);
                let found = match which {
                    "kernel" => group_mixed_into(members, out, runs),
                    _ => group_mixed_portable(members, out, runs),
                };
                assert_eq!(found, [Finite::default(); 3], "{which}");
                for k in 0..3 {
                    assert_eq!(
                        kept(&got[k]),
                        kept(&want[k]),
                        "{which}: member {k}, len {len}, slack {slack}, padded {padded:?}"
                    );
                }
            }
        }
    }

    /// One run of `len` values in each member and output, no slack.
    fn one_run(len: usize) -> MixRuns {
        MixRuns {
            rows: 1,
            len,
            dst_stride: len,
            slack: 0,
            prefetch: false,
        }
    }

    /// An infinity stored in either member, in the body or a tail, and a normalised value
    /// that overflows, are each that member's verdict only; the zero lanes filling a tail
    /// are not judged (a map that overflows on zero).
    #[test]
    fn verdicts_are_each_members_and_only_of_real_lanes() {
        let len = 21; // two eight-value steps and a tail of five
        let fine = stored(&vec![2.0; len]);
        let runs = one_run(len);
        for which in ["kernel", "portable"] {
            let run = |m: [Member<'_>; 2]| {
                let (mut x, mut y) = (vec![0f32; len], vec![0f32; len]);
                match which {
                    "kernel" => group_mixed_into(m, [&mut x, &mut y], runs),
                    _ => group_mixed_portable(m, [&mut x, &mut y], runs),
                }
            };
            fn plain(src: &[u8]) -> Member<'_> {
                Member {
                    src,
                    stride: 21,
                    maps: &[],
                    weight: 0.5,
                    keep: &[],
                    jump: None,
                }
            }
            // An infinity, and NaNs of either sign, in the body and in the tail.
            for (at, pattern) in [3usize, 19]
                .into_iter()
                .flat_map(|a| [0x7c00u16, 0xfc00, 0x7e00, 0xfe01, 0x7c01].map(|p| (a, p)))
            {
                let mut bad = vec![f16::from_f32(2.0).to_bits(); len];
                bad[at] = pattern;
                let bad = bytes(&bad);
                let [x, y] = run([plain(&fine), plain(&bad)]);
                assert!(x.stored && !y.stored, "{which}, at {at}, {pattern:#06x}");
                let [x, y] = run([plain(&bad), plain(&fine)]);
                assert!(!x.stored && y.stored, "{which}, at {at}");
                let mut big = vec![f16::from_f32(1.0).to_bits(); len];
                big[at] = f16::from_f32(-60000.0).to_bits();
                let big = bytes(&big);
                let huge = [RowMap::Normalise {
                    shift: 1.0,
                    scale: 1e35,
                    add: 0.0,
                }];
                let m = Member {
                    maps: &huge,
                    ..plain(&big)
                };
                let [x, y] = run([plain(&fine), m]);
                assert!(
                    x.normalised && y.stored && !y.normalised,
                    "{which}, at {at}"
                );
            }
            // Zero overflows this map; the tail's unused lanes hold zeros.
            let high = stored(&vec![60000.0; len]);
            let tight = [RowMap::Normalise {
                shift: 60000.0,
                scale: 1e35,
                add: 0.0,
            }];
            let m = Member {
                maps: &tight,
                ..plain(&high)
            };
            assert_eq!(run([m, plain(&fine)]), [Finite::default(); 2], "{which}");
        }
    }

    /// The kernel judges mixtures, not members, where no member is left unmixed: whatever
    /// the weights (`0`, where `0·∞` must still be seen; just under `1`, where the partner
    /// weighs `2⁻²⁴`), an infinity or a NaN in any member of a pair or a three-cycle, and
    /// a normalised value that overflows, are still that member's verdict and no other's;
    /// with gains too (the kernel's add alone).
    #[test]
    fn a_value_not_finite_is_seen_through_any_mixture() {
        let len = 19; // two eight-value steps and a tail of three
        let fine = stored(&vec![2.0; len]);
        let huge = [RowMap::Normalise {
            shift: 1.0,
            scale: 1e35,
            add: 0.0,
        }];
        /// A member of one run of `src`.
        fn member<'a>(src: &'a [u8], weight: f32, maps: &'a [RowMap]) -> Member<'a> {
            Member {
                src,
                stride: src.len() / 2,
                maps,
                weight,
                keep: &[],
                jump: None,
            }
        }
        /// One run of `len` of each member mixed by the kernel: each member's verdict.
        fn run<const N: usize>(m: [Member<'_>; N], len: usize) -> [Finite; N] {
            let mut out = [(); N].map(|_| vec![0f32; len]);
            group_mixed_into(m, out.each_mut().map(|o| &mut o[..]), one_run(len))
        }
        let weights = [0.0f32, 0.5, 1.0 - f32::EPSILON / 2.0, 0.25, 1.0];
        // Finite once normalised (3e38), not once its gain is added: judging what is
        // stored sees it (helper-24's attack: judging before the gain did not).
        let over = [RowMap::Normalise {
            shift: 0.0,
            scale: 1.5e38,
            add: 1.0e38,
        }];
        for (at, pattern) in [4usize, 17]
            .into_iter()
            .flat_map(|a| [0x7c00u16, 0xfc00, 0x7e01].map(|p| (a, p)))
        {
            let mut bad = vec![f16::from_f32(2.0).to_bits(); len];
            bad[at] = pattern;
            let bad = bytes(&bad);
            let mut big = vec![f16::from_f32(1.0).to_bits(); len];
            big[at] = f16::from_f32(-60000.0).to_bits();
            let big = bytes(&big);
            let gain = [RowMap::Add(-96.0)];
            let (ws, gs) = (weights.iter(), [&[][..], &gain[..]]);
            for (w, v, g) in
                ws.flat_map(|&w| weights.into_iter().flat_map(move |v| gs.map(|g| (w, v, g))))
            {
                let case = format!("at {at}, {pattern:#06x}, weights {w} {v}, maps {g:?}");
                for k in 0..2 {
                    let mut m = [member(&fine, w, g), member(&fine, v, g)];
                    m[k].src = &bad;
                    let got = run(m, len);
                    assert!(
                        got.iter().enumerate().all(|(q, g)| g.stored == (q != k)),
                        "pair, member {k} stored bad, {case}: {got:?}"
                    );
                    for (src, maps) in [(&big, &huge), (&fine, &over)] {
                        m[k] = member(src, m[k].weight, maps);
                        let got = run(m, len);
                        assert!(
                            got.iter()
                                .enumerate()
                                .all(|(q, g)| g.stored && g.normalised == (q != k)),
                            "pair, member {k} normalised bad, {maps:?}, {case}: {got:?}"
                        );
                    }
                }
                for k in 0..3 {
                    let mut m = [
                        member(&fine, w, g),
                        member(&fine, v, g),
                        member(&fine, 0.75, g),
                    ];
                    m[k].src = &bad;
                    let got = run(m, len);
                    assert!(
                        got.iter().enumerate().all(|(q, g)| g.stored == (q != k)),
                        "three-cycle, member {k} stored bad, {case}: {got:?}"
                    );
                }
            }
        }
    }

    /// Keep bits zero their columns in every run of each member (`+0`, whatever the
    /// mixture: a NaN too), in the kernel (its body and tail, stored whole into the slack
    /// or through the mask) and the portable loop alike; every other value is the
    /// unmasked pass's bits, and a masked value not finite is still reported.
    #[test]
    fn masked_columns_are_plus_zero_and_the_rest_the_unmasked_bits() {
        fn check<const N: usize>(len: usize, slack: usize, nan_at: Option<usize>) {
            let (rows, stride) = (3, len + 2);
            let srcs: [Vec<u8>; N] = std::array::from_fn(|k| {
                let mut bits: Vec<u16> = (0..rows * stride)
                    .map(|i| f16::from_f32(((i * 37 + k * 11) % 91) as f32 * 0.3 - 13.0).to_bits())
                    .collect();
                bits[stride + 1] = f16::from_f32(-0.0).to_bits();
                if let (0, Some(at)) = (k, nan_at) {
                    bits[stride + at] = 0x7e00;
                }
                bytes(&bits)
            });
            let keeps: [Vec<u32>; N] = std::array::from_fn(|k| {
                (0..len.next_multiple_of(8))
                    .map(|c| if (c * 7 + k * 3) % 5 < 2 { 0 } else { u32::MAX })
                    .collect()
            });
            let runs = MixRuns {
                rows,
                len,
                dst_stride: len,
                slack,
                prefetch: true,
            };
            let n = rows * len + slack;
            let member = |k: usize, keep: bool| Member {
                src: &srcs[k],
                stride,
                maps: &[],
                weight: [0.3, 0.75, 0.5][k],
                keep: if keep { &keeps[k] } else { &[] },
                jump: None,
            };
            let mut plain: [Vec<f32>; N] = std::array::from_fn(|_| vec![f32::MIN; n]);
            group_mixed_portable(
                std::array::from_fn(|k| member(k, false)),
                plain.each_mut().map(|v| v.as_mut_slice()),
                runs,
            );
            for which in ["kernel", "portable"] {
                let mut got: [Vec<f32>; N] = std::array::from_fn(|_| vec![f32::MIN; n]);
                let out = got.each_mut().map(|v| v.as_mut_slice());
                let members = std::array::from_fn(|k| member(k, true));
                let found = match which {
                    "kernel" => group_mixed_into(members, out, runs),
                    _ => group_mixed_portable(members, out, runs),
                };
                assert_eq!(found[0].stored, nan_at.is_none(), "{which} {len}");
                for k in 0..N {
                    for i in 0..rows * len {
                        let c = i % len;
                        let want = match keeps[k][c] {
                            0 => 0.0f32.to_bits(),
                            _ => plain[k][i].to_bits(),
                        };
                        let what =
                            format!("{which}, {N} members, len {len}, member {k}, value {i}");
                        assert_eq!(got[k][i].to_bits(), want, "{what}");
                    }
                }
            }
        }
        for len in [5, 8, 13, 101] {
            for slack in [0, 7] {
                check::<2>(len, slack, None);
                check::<3>(len, slack, None);
            }
            // A NaN in a column member 0 masks (column 0: every keep pattern masks it).
            check::<2>(len, 0, Some(0));
        }
    }

    #[test]
    #[should_panic(expected = "beyond a source")]
    fn a_run_beyond_a_source_panics_before_reading() {
        let runs = MixRuns {
            rows: 2,
            len: 8,
            dst_stride: 8,
            slack: 0,
            prefetch: false,
        };
        let m = Member {
            src: &[0u8; 30],
            stride: 8,
            maps: &[],
            weight: 0.5,
            keep: &[],
            jump: None,
        };
        group_mixed_into([m, m], [&mut [0f32; 16], &mut [0f32; 16]], runs);
    }
}
