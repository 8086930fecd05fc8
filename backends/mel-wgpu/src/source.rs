//! The shader source specialised to a plan: the plan's constants and the FFT's stage
//! sequence are prepended to `mel.wgsl` (as NVRTC macros are for the CUDA kernel).

use mel_core::config::{LogScale, PadMode};
use mel_core::dsp::{FilterSpans, SegmentCsr, dft_twiddles};
use mel_core::{Dtype, MelPlan};

/// The shader, before specialisation.
pub const SHADER_SOURCE: &str = include_str!("mel.wgsl");

/// Frames one workgroup transforms in the direct-DFT pass: a long segment is spread over
/// many workgroups (one workgroup doing a whole 1 s speech clip ran so long that
/// lavapipe dropped the dispatch without an error).
pub const DFT_FRAMES: usize = 8;

/// Whether `plan` runs the one-pass FFT shader (`mel_main`); otherwise the two direct-DFT
/// passes (`mel_dft` for blocks of [`DFT_FRAMES`] frames, then `mel_finish`).
pub fn one_pass(plan: &MelPlan) -> bool {
    plan.n_fft.is_power_of_two() && plan.n_fft >= 4
}

/// The entry points to dispatch in order, each with its workgroups per distinct segment.
pub fn passes(plan: &MelPlan) -> Vec<(&'static str, usize)> {
    if one_pass(plan) {
        vec![("mel_main", 1)]
    } else {
        vec![
            ("mel_dft", plan.n_frames.div_ceil(DFT_FRAMES)),
            ("mel_finish", 1),
        ]
    }
}

/// Invocations per workgroup, unless `MELCTL_WGPU_WORKGROUP` (a power of two, 32..=1024)
/// says otherwise (for tuning). On the H100 (leak-4k, f16) 64 gave 83k clips/s, 128
/// 115k, 256 123k (BENCHMARKS.md).
pub const WORKGROUP: usize = 256;

/// The workgroup size in force: [`WORKGROUP`] or a valid `MELCTL_WGPU_WORKGROUP`.
pub fn workgroup_size() -> usize {
    std::env::var("MELCTL_WGPU_WORKGROUP")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|w| w.is_power_of_two() && (32..=1024).contains(w))
        .unwrap_or(WORKGROUP)
}

/// What the shader writes: f32 bits, or two 16-bit values per word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceOut {
    /// f32, converted on the host when the plan wants f16/bf16 and a segment holds an
    /// odd number of values (16-bit pairs would straddle segments).
    F32,
    /// f16 bit patterns, two per word.
    F16,
    /// bf16 bit patterns, two per word.
    Bf16,
}

impl DeviceOut {
    /// The output the shader produces for `plan`.
    pub fn for_plan(plan: &MelPlan) -> DeviceOut {
        let even = plan.values_per_segment() % 2 == 0;
        match plan.dtype {
            Dtype::F16 if even => DeviceOut::F16,
            Dtype::Bf16 if even => DeviceOut::Bf16,
            _ => DeviceOut::F32,
        }
    }

    /// Bytes per value on the device.
    pub fn bytes(self) -> usize {
        if self == DeviceOut::F32 { 4 } else { 2 }
    }
}

/// The integer tables, concatenated into one buffer, with the section starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Tables {
    /// offsets, map start, map out, filter first, filter len, filter offset.
    pub ints: Vec<u32>,
    /// Start of each section of `ints`, in the order above.
    pub sections: [usize; 6],
    /// The filters' non-zero weights.
    pub weights: Vec<f32>,
    /// exp(-2πik/n_fft) as interleaved (re, im).
    pub twiddle: Vec<f64>,
}

impl Tables {
    /// The tables of `plan`.
    pub fn new(plan: &MelPlan) -> Tables {
        let csr = SegmentCsr::new(plan);
        let spans = FilterSpans::new(plan);
        let offsets: Vec<u32> = plan.distinct_offsets.iter().map(|&o| o as u32).collect();
        let parts = [
            offsets,
            csr.start,
            csr.out,
            spans.first,
            spans.len,
            spans.offset,
        ];
        let mut ints = Vec::new();
        let mut sections = [0; 6];
        for (s, p) in sections.iter_mut().zip(&parts) {
            *s = ints.len();
            ints.extend_from_slice(p);
        }
        Tables {
            ints,
            sections,
            weights: spans.weights,
            twiddle: dft_twiddles(plan.n_fft),
        }
    }
}

/// Workgroup memory the shader needs for `plan`, bytes: with a segment's mel values
/// (`mel_in_workgroup`) or without them (they then live in a global scratch buffer).
pub fn workgroup_bytes(plan: &MelPlan, mel_in_workgroup: bool, workgroup: usize) -> usize {
    let mel = if mel_in_workgroup {
        plan.values_per_segment()
    } else {
        1
    };
    plan.n_fft * 16 + 2 * plan.n_freqs * 4 + mel * 4 + workgroup * 4
}

fn f32_lit(v: f64) -> String {
    let x = v as f32;
    if x.is_finite() {
        format!("{x:e}f")
    } else {
        "3.0e38f".into()
    }
}

/// The complete WGSL source for `plan`.
pub fn shader(plan: &MelPlan, tables: &Tables, mel_in_workgroup: bool, workgroup: usize) -> String {
    let (log_kind, log_mul, amin, top, ln_off) = match plan.log {
        LogScale::Db { amin, top_db } => (1, plan.db_multiplier(), amin, top_db, 0.0),
        LogScale::Ln { offset } => (2, 1.0, 0.0, None, offset),
        LogScale::None => (0, 1.0, 0.0, None, 0.0),
    };
    let out_kind = match DeviceOut::for_plan(plan) {
        DeviceOut::F32 => 0,
        DeviceOut::F16 => 1,
        DeviceOut::Bf16 => 2,
    };
    let pad = if plan.center { plan.n_fft / 2 } else { 0 };
    let n = plan.n_fft;
    let pow2 = one_pass(plan);
    let u = |v: usize| format!("{v}u");
    let consts: Vec<(&str, &str, String)> = vec![
        ("N_FFT", "u32", u(n)),
        ("N_FREQS", "u32", u(plan.n_freqs)),
        ("PW_LEN", "u32", u(2 * plan.n_freqs)),
        ("HOP", "u32", u(plan.hop_length)),
        ("N_FRAMES", "u32", u(plan.n_frames)),
        ("PAIRS", "u32", u(plan.n_frames.div_ceil(2))),
        ("SEG_LEN", "u32", u(plan.segment_len)),
        ("PAD", "u32", u(pad)),
        (
            "REFLECT",
            "bool",
            (plan.pad_mode == PadMode::Reflect && pad > 0).to_string(),
        ),
        ("POWER", "u32", u(plan.power as usize)),
        ("N_MELS", "u32", u(plan.n_mels)),
        ("CLIP_SAMPLES", "u32", u(plan.clip_samples)),
        ("N_DISTINCT", "u32", u(plan.distinct_offsets.len())),
        ("SEGS_PER_CLIP", "u32", u(plan.segment_map.len())),
        ("VPS", "u32", u(plan.values_per_segment())),
        ("LOG_KIND", "u32", u(log_kind)),
        ("LOG_MUL", "f32", f32_lit(log_mul)),
        ("AMIN", "f32", f32_lit(amin)),
        ("HAS_TOP_DB", "bool", top.is_some().to_string()),
        ("TOP_DB", "f32", f32_lit(top.unwrap_or(0.0))),
        ("LN_OFFSET", "f32", f32_lit(ln_off)),
        ("OUT_KIND", "u32", u(out_kind)),
        ("WG", "u32", u(workgroup)),
        ("BFLY4", "u32", u((n / 4).div_ceil(workgroup).max(1))),
        ("BFLY2", "u32", u((n / 2).div_ceil(workgroup).max(1))),
        ("PER_K", "u32", u(plan.n_freqs.div_ceil(workgroup))),
        ("MEL_IN_WG", "bool", mel_in_workgroup.to_string()),
        ("DFT_FRAMES", "u32", u(DFT_FRAMES)),
        ("DFT_BLOCKS", "u32", u(plan.n_frames.div_ceil(DFT_FRAMES))),
        (
            "MEL_WG_LEN",
            "u32",
            u(if mel_in_workgroup {
                plan.values_per_segment()
            } else {
                1
            }),
        ),
        ("I_OFFSETS", "u32", u(tables.sections[0])),
        ("I_MAP_START", "u32", u(tables.sections[1])),
        ("I_MAP_OUT", "u32", u(tables.sections[2])),
        ("I_F_FIRST", "u32", u(tables.sections[3])),
        ("I_F_LEN", "u32", u(tables.sections[4])),
        ("I_F_OFF", "u32", u(tables.sections[5])),
    ];
    let mut src = String::from("// Generated for one plan by mel-wgpu (source.rs).\n");
    for (name, ty, value) in consts {
        src += &format!("const {name}: {ty} = {value};\n");
    }
    // The FFT's stages, unrolled: radix 4 while it divides what is left, then radix 2.
    src += "fn fft(lid: u32) {\n";
    if pow2 {
        let mut ns = 1;
        while ns * 4 <= n {
            src += &format!("    stage4({ns}u, lid);\n");
            ns *= 4;
        }
        if ns < n {
            src += &format!("    stage2({ns}u, lid);\n");
        }
    }
    src += "}\n\n";
    src + SHADER_SOURCE
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::Config;

    #[test]
    fn leak_4k_specialisation() {
        let plan = MelPlan::new(&Config::default()).unwrap();
        let t = Tables::new(&plan);
        assert_eq!(t.sections, [0, 159, 319, 556, 588, 620]);
        assert_eq!(t.ints.len(), 652);
        let s = shader(&plan, &t, true, WORKGROUP);
        assert!(s.contains("const N_FFT: u32 = 512u;"));
        assert!(s.contains("const OUT_KIND: u32 = 1u;"));
        // 512 = 4^4 · 2: four radix-4 stages and one radix-2 stage.
        assert!(s.contains("stage4(64u, lid);\n    stage2(256u, lid);"));
        assert!(s.contains("const MEL_IN_WG: bool = true;"));
        assert_eq!(
            workgroup_bytes(&plan, true, 64),
            512 * 16 + 257 * 8 + 160 * 4 + 64 * 4
        );
        assert_eq!(
            workgroup_bytes(&plan, false, 256),
            512 * 16 + 257 * 8 + 4 + 256 * 4
        );
    }

    #[test]
    fn odd_segments_are_written_as_f32_and_converted_on_the_host() {
        let mut c = Config::default();
        c.mel.n_mels = 31; // 31 × 5 values per segment: odd
        let plan = MelPlan::new(&c).unwrap();
        assert_eq!(DeviceOut::for_plan(&plan), DeviceOut::F32);
        c.mel.n_mels = 32;
        c.output.dtype = Dtype::Bf16;
        assert_eq!(
            DeviceOut::for_plan(&MelPlan::new(&c).unwrap()),
            DeviceOut::Bf16
        );
    }
}
