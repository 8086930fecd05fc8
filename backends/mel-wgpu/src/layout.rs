//! The dispatch shape of a plan's shader: one pass (the FFT) or two (the direct DFT), and
//! how a workgroup is used ([`Layout`]: its size, where mel values live, and for a
//! power-of-two `n_fft` the FFT's shape), chosen within the adapter's limits.

use mel_core::MelPlan;
use mel_core::dsp::stockham_radices;

/// Frames one workgroup transforms in the direct-DFT pass: a long segment is spread over
/// many workgroups (one workgroup doing a whole 1 s speech clip ran so long that
/// lavapipe dropped the dispatch without an error).
pub const DFT_FRAMES: usize = 8;

/// Whether `plan` runs the one-pass FFT shader (`mel_main`); otherwise the two direct-DFT
/// passes (`mel_dft` for blocks of [`DFT_FRAMES`] frames, then `mel_finish`).
pub fn one_pass(plan: &MelPlan) -> bool {
    plan.n_fft().is_power_of_two() && plan.n_fft() >= 4
}

/// The entry points to dispatch in order, each with its workgroups per distinct segment.
pub fn passes(plan: &MelPlan) -> Vec<(&'static str, usize)> {
    if one_pass(plan) {
        vec![("mel_main", 1)]
    } else {
        vec![
            ("mel_dft", plan.n_frames().div_ceil(DFT_FRAMES)),
            ("mel_finish", 1),
        ]
    }
}

/// The most invocations per workgroup by default (`WgpuOptions::max_workgroup` tunes
/// it). The FFT path uses `pairs × n_fft / 8` of them (192 for leak-4k: three frame pairs
/// of 64 butterflies); the direct DFT all of them.
pub const WORKGROUP: usize = 256;

/// How a plan's shader uses a workgroup: its size, where mel values live, and for a
/// power-of-two `n_fft` the FFT's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Invocations per workgroup.
    pub workgroup: usize,
    /// Whether a segment's mel values stay in workgroup memory (else in `scratch`).
    pub mel_in_workgroup: bool,
    /// The one-pass FFT's shape; `None` for the two direct-DFT passes.
    pub fft: Option<FftShape>,
}

/// The shape of the one-pass FFT shader (`fft.wgsl`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FftShape {
    /// Radix of each Stockham stage, first to last: 8s, then a 4 or a 2.
    pub radices: Vec<usize>,
    /// Invocations per transform (`T`): one radix-8 butterfly each where possible.
    pub per_transform: usize,
    /// Frame pairs transformed side by side in a workgroup (`G`).
    pub pairs: usize,
    /// Whether `buf` has a spare slot every 8 values (no bank conflicts on the first
    /// stage's stride-8 writes), at 1/8 more workgroup memory.
    pub pad_banks: bool,
    /// Whether the stage tables are copied into workgroup memory when a workgroup starts
    /// (where it fits after everything else), rather than read from the storage buffer.
    pub twiddles_in_workgroup: bool,
}

impl FftShape {
    /// Length of `buf`, in complex values.
    pub fn buf_len(&self, n_fft: usize) -> usize {
        let values = self.pairs * n_fft;
        values + if self.pad_banks { values / 8 } else { 0 }
    }
}

impl Layout {
    /// The layout for `plan` on an adapter allowing `max_invocations` invocations and
    /// `max_bytes` bytes of workgroup memory: for the FFT, as many frame pairs side by
    /// side as fit (mel values and bank padding kept where that costs no pair).
    pub fn choose(
        plan: &MelPlan,
        max_invocations: usize,
        max_bytes: usize,
    ) -> std::result::Result<Layout, String> {
        let max_invocations = prev_power_of_two(max_invocations.max(1));
        let too_big = |need: usize| {
            format!(
                "n_fft {} with {} mels × {} frames needs {need} bytes of workgroup memory; \
                 the adapter allows {max_bytes}",
                plan.n_fft(),
                plan.n_mels(),
                plan.n_frames()
            )
        };
        if !one_pass(plan) {
            let layout = Layout {
                workgroup: max_invocations,
                mel_in_workgroup: false,
                fft: None,
            };
            let need = layout.workgroup_bytes(plan);
            return if need <= max_bytes {
                Ok(layout)
            } else {
                Err(too_big(need))
            };
        }
        let radices = stockham_radices(plan.n_fft());
        let per_transform = (plan.n_fft() / radices[0]).min(max_invocations);
        let most_pairs = plan
            .n_frames()
            .div_ceil(2)
            .min(max_invocations / per_transform)
            .max(1);
        let mut best: Option<Layout> = None;
        for (mel_in_workgroup, pad_banks) in
            [(true, true), (true, false), (false, true), (false, false)]
        {
            for pairs in (1..=most_pairs).rev() {
                let layout = Layout {
                    workgroup: pairs * per_transform,
                    mel_in_workgroup,
                    fft: Some(FftShape {
                        radices: radices.clone(),
                        per_transform,
                        pairs,
                        pad_banks,
                        twiddles_in_workgroup: false,
                    }),
                };
                if layout.workgroup_bytes(plan) <= max_bytes {
                    let better = best.as_ref().is_none_or(|b| b.workgroup < layout.workgroup);
                    if better {
                        best = Some(layout);
                    }
                    break;
                }
            }
        }
        // The stage tables in workgroup memory where they still fit.
        if let Some(b) = best.as_mut() {
            let mut with = b.clone();
            if let Some(f) = with.fft.as_mut() {
                f.twiddles_in_workgroup = true;
            }
            if with.workgroup_bytes(plan) <= max_bytes {
                *b = with;
            }
        }
        best.ok_or_else(|| {
            let smallest = Layout {
                workgroup: per_transform,
                mel_in_workgroup: false,
                fft: Some(FftShape {
                    radices,
                    per_transform,
                    pairs: 1,
                    pad_banks: false,
                    twiddles_in_workgroup: false,
                }),
            };
            too_big(smallest.workgroup_bytes(plan))
        })
    }

    /// Workgroup memory this layout needs for `plan`, bytes.
    pub fn workgroup_bytes(&self, plan: &MelPlan) -> usize {
        let mel = if self.mel_in_workgroup {
            plan.values_per_segment()
        } else {
            1
        };
        let path = match &self.fft {
            // buf (double-word complex values), the stage tables (two entries per
            // twiddle, or 1).
            Some(f) => {
                let tw = if f.twiddles_in_workgroup {
                    2 * (plan.n_fft() - 1)
                } else {
                    1
                };
                (f.buf_len(plan.n_fft()) + tw) * 16
            }
            // frame_buf (value, error and split per sample), pw.
            None => plan.n_fft() * 16 + plan.n_freqs() * 4,
        };
        path + mel * 4 + 4
    }
}

fn prev_power_of_two(v: usize) -> usize {
    1 << (usize::BITS - 1 - v.leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::Config;

    /// lavapipe's and many integrated GPUs' workgroup memory; NVIDIA allows 48 KiB.
    const WG_32K: usize = 32 * 1024;

    #[test]
    fn too_little_workgroup_memory_is_a_clear_error() {
        let mut c = Config::default();
        c.audio.clip_seconds = 4.0;
        c.segment.long = mel_core::spec::StageSetting::OFF;
        c.segment.short = mel_core::spec::StageSetting::OFF;
        c.mel.n_fft = 4096;
        let plan = MelPlan::from_config(&c).unwrap();
        let e = Layout::choose(&plan, WORKGROUP, WG_32K).unwrap_err();
        assert!(
            e.contains("n_fft 4096") && e.contains("allows 32768"),
            "{e}"
        );
    }
}
