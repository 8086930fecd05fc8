//! The shader source specialised to a plan: the plan's constants, `common.wgsl`, and
//! either `fft.wgsl` with the FFT's stages generated here or `dft.wgsl` (as NVRTC macros
//! specialise the CUDA kernel).

use mel_core::dsp::{
    ComplexDw, FilterSpans, SegmentCsr, f32_dw, stockham_twiddles_dw, twiddles_dw,
};
use mel_core::spec::{LogScale, PadMode};
use mel_core::{Dtype, MelPlan};

/// What both paths share: bindings, sample access, log, top_db, output conversion.
pub const COMMON_SOURCE: &str = include_str!("common.wgsl");

/// Compensated (double-word) f32 arithmetic, shielded from compilers' reassociation.
pub const DW_SOURCE: &str = include_str!("dw.wgsl");

/// The one-pass path for a power-of-two `n_fft` (its stages are generated here).
pub const FFT_SOURCE: &str = include_str!("fft.wgsl");

/// The two-pass direct-DFT path for any `n_fft`.
pub const DFT_SOURCE: &str = include_str!("dft.wgsl");

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
        let even = plan.values_per_segment().is_multiple_of(2);
        match plan.dtype() {
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

/// The tables the shader reads, concatenated into few buffers, with the section starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Tables {
    /// offsets, map start, map out, filter first, filter len, filter offset.
    pub ints: Vec<u32>,
    /// Start of each section of `ints`, in the order above.
    pub sections: [usize; 6],
    /// The filters' non-zero weights.
    pub weights: Vec<f32>,
    /// The analysis window per sample: `[hi, lo, hi's 12-bit high part, the rest of hi]`
    /// (hi rounded once from f64, lo the rest).
    pub window: Vec<[f32; 4]>,
    /// Twiddles, two entries each: `[re.hi, im.hi, re.lo, im.lo]` and the split of the hi
    /// parts `[re.hi12, im.hi12, re.rest, im.rest]`, computed in f64. For a power-of-two
    /// `n_fft` the FFT's per-stage tables ([`stockham_twiddles_dw`]), else
    /// `exp(-2πik/n_fft)` for every `k` ([`twiddles_dw`]).
    pub twiddle: Vec<[f32; 4]>,
}

/// Veltkamp's split of `x` into a part of at most 12 significant bits and the rest
/// (both exact f32: `hi + lo == x`), as the shader's Dekker products need their factors.
pub fn split12(x: f32) -> [f32; 2] {
    let c = 4097.0 * x;
    let hi = c - (c - x);
    [hi, x - hi]
}

/// A twiddle's two table entries (see [`Tables::twiddle`]).
fn twiddle_entries(t: &ComplexDw) -> [[f32; 4]; 2] {
    let [re1, re2] = split12(t.hi[0]);
    let [im1, im2] = split12(t.hi[1]);
    [[t.hi[0], t.hi[1], t.lo[0], t.lo[1]], [re1, im1, re2, im2]]
}

impl Tables {
    /// The tables of `plan`.
    pub fn new(plan: &MelPlan) -> Tables {
        let csr = SegmentCsr::new(plan);
        let spans = FilterSpans::new(plan);
        let offsets: Vec<u32> = plan.distinct_offsets().iter().map(|&o| o as u32).collect();
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
        let n = plan.n_fft();
        let twiddles = if one_pass(plan) {
            stockham_twiddles_dw(n, &radices(n))
        } else {
            twiddles_dw(n)
        };
        let twiddle = twiddles.iter().flat_map(twiddle_entries).collect();
        let window = plan
            .window()
            .iter()
            .map(|&w| {
                let [hi, lo] = f32_dw(w);
                let [h1, h2] = split12(hi);
                [hi, lo, h1, h2]
            })
            .collect();
        Tables {
            ints,
            sections,
            weights: spans.weights,
            window,
            twiddle,
        }
    }
}

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

/// The stage radices of a power-of-two transform of `n` points: radix 8 while it
/// divides what is left, then one radix-4 or radix-2 stage.
pub fn radices(n: usize) -> Vec<usize> {
    let bits = n.trailing_zeros() as usize;
    let mut r = vec![8; bits / 3];
    match bits % 3 {
        1 => r.push(2),
        2 => r.push(4),
        _ => {}
    }
    r
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
        let radices = radices(plan.n_fft());
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

fn f32_lit(v: f64) -> String {
    let x = v as f32;
    if x.is_finite() {
        format!("{x:e}f")
    } else {
        "3.0e38f".into()
    }
}

/// The complete WGSL source for `plan` in `layout`.
pub fn shader(plan: &MelPlan, tables: &Tables, layout: &Layout) -> String {
    let (log_kind, log_mul, amin, top, ln_off) = match plan.log() {
        LogScale::Db { amin, top_db } => (1, plan.db_multiplier(), amin, top_db, 0.0),
        LogScale::Ln { offset } => (2, 1.0, 0.0, None, offset),
        LogScale::None => (0, 1.0, 0.0, None, 0.0),
    };
    let out_kind = match DeviceOut::for_plan(plan) {
        DeviceOut::F32 => 0,
        DeviceOut::F16 => 1,
        DeviceOut::Bf16 => 2,
    };
    let pad = if plan.center() { plan.n_fft() / 2 } else { 0 };
    let n = plan.n_fft();
    let u = |v: usize| format!("{v}u");
    let pairs = plan.n_frames().div_ceil(2);
    let r2 = f32_dw(std::f64::consts::FRAC_1_SQRT_2);
    let r2s = split12(r2[0]);
    let mut consts: Vec<(&str, &str, String)> = vec![
        ("N_FFT", "u32", u(n)),
        ("N_FREQS", "u32", u(plan.n_freqs())),
        ("HOP", "u32", u(plan.hop_length())),
        ("N_FRAMES", "u32", u(plan.n_frames())),
        ("PAIRS", "u32", u(pairs)),
        ("SEG_LEN", "u32", u(plan.segment_len())),
        ("PAD", "u32", u(pad)),
        (
            "REFLECT",
            "bool",
            (plan.pad_mode() == PadMode::Reflect && pad > 0).to_string(),
        ),
        ("POWER", "u32", u(plan.power() as usize)),
        ("N_MELS", "u32", u(plan.n_mels())),
        ("CLIP_SAMPLES", "u32", u(plan.clip_samples())),
        ("N_DISTINCT", "u32", u(plan.distinct_offsets().len())),
        ("SEGS_PER_CLIP", "u32", u(plan.segment_map().len())),
        ("VPS", "u32", u(plan.values_per_segment())),
        ("LOG_KIND", "u32", u(log_kind)),
        ("LOG_MUL", "f32", f32_lit(log_mul)),
        ("AMIN", "f32", f32_lit(amin)),
        ("HAS_TOP_DB", "bool", top.is_some().to_string()),
        ("TOP_DB", "f32", f32_lit(top.unwrap_or(0.0))),
        ("LN_OFFSET", "f32", f32_lit(ln_off)),
        ("OUT_KIND", "u32", u(out_kind)),
        ("WG", "u32", u(layout.workgroup)),
        ("MEL_IN_WG", "bool", layout.mel_in_workgroup.to_string()),
        (
            "MEL_WG_LEN",
            "u32",
            u(if layout.mel_in_workgroup {
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
    match &layout.fft {
        Some(f) => consts.extend([
            ("T", "u32", u(f.per_transform)),
            ("G", "u32", u(f.pairs)),
            ("PAIR_GROUPS", "u32", u(pairs.div_ceil(f.pairs))),
            ("BUF_LEN", "u32", u(f.buf_len(n))),
            ("R2", "f32", f32_lit(r2[0] as f64)),
            ("R2_LO", "f32", f32_lit(r2[1] as f64)),
            (
                "R2_SPLIT",
                "vec2<f32>",
                format!(
                    "vec2<f32>({}, {})",
                    f32_lit(r2s[0] as f64),
                    f32_lit(r2s[1] as f64)
                ),
            ),
            ("PAD_BANKS", "bool", f.pad_banks.to_string()),
            ("TW_LEN", "u32", u(tables.twiddle.len() / 2)),
            ("TW_IN_WG", "bool", f.twiddles_in_workgroup.to_string()),
            (
                "TW_WG_LEN",
                "u32",
                u(if f.twiddles_in_workgroup {
                    tables.twiddle.len()
                } else {
                    1
                }),
            ),
        ]),
        None => consts.extend([
            ("DFT_FRAMES", "u32", u(DFT_FRAMES)),
            ("DFT_BLOCKS", "u32", u(plan.n_frames().div_ceil(DFT_FRAMES))),
        ]),
    }
    let mut src = String::from("// Generated for one plan by mel-wgpu (source.rs).\n");
    for (name, ty, value) in consts {
        src += &format!("const {name}: {ty} = {value};\n");
    }
    src += "\n";
    src += COMMON_SOURCE;
    src += "\n";
    src += DW_SOURCE;
    match &layout.fft {
        Some(f) => {
            src += "\n";
            src += FFT_SOURCE;
            src += "\n// The FFT's stages, generated by source.rs.\n";
            src += &fft_stages(n, f);
        }
        None => {
            src += "\n";
            src += DFT_SOURCE;
        }
    }
    src
}

/// An `r`-point DFT of the double-word values `x0..x{r-1}` (r = 2, 4 or 8) into new
/// values `z0..z{r-1}` (`dw.wgsl`: every addition compensated).
fn butterfly(r: usize) -> String {
    // A 4-point DFT of a[0..4] into `{out}0..{out}3`.
    let dft4 = |a: [&str; 4], out: &str| {
        format!(
            "let {out}s0 = dw_add({a0}, {a2});\nlet {out}s1 = dw_sub({a0}, {a2});\n\
             let {out}s2 = dw_add({a1}, {a3});\nlet {out}s3 = dw_negi(dw_sub({a1}, {a3}));\n\
             let {out}0 = dw_add({out}s0, {out}s2);\nlet {out}1 = dw_add({out}s1, {out}s3);\n\
             let {out}2 = dw_sub({out}s0, {out}s2);\nlet {out}3 = dw_sub({out}s1, {out}s3);\n",
            a0 = a[0],
            a1 = a[1],
            a2 = a[2],
            a3 = a[3]
        )
    };
    match r {
        2 => "let z0 = dw_add(x0, x1);\nlet z1 = dw_sub(x0, x1);\n".to_string(),
        4 => dft4(["x0", "x1", "x2", "x3"], "z"),
        8 => {
            // Even and odd halves, then z[m] = e[m] + w8^m o[m], z[m + 4] = e[m] - w8^m o[m].
            dft4(["x0", "x2", "x4", "x6"], "e")
                + &dft4(["x1", "x3", "x5", "x7"], "o")
                + "let p1 = dw_w8(o1);\nlet p2 = dw_negi(o2);\nlet p3 = dw_w83(o3);\n\
                   let z0 = dw_add(e0, o0);\nlet z4 = dw_sub(e0, o0);\n\
                   let z1 = dw_add(e1, p1);\nlet z5 = dw_sub(e1, p1);\n\
                   let z2 = dw_add(e2, p2);\nlet z6 = dw_sub(e2, p2);\n\
                   let z3 = dw_add(e3, p3);\nlet z7 = dw_sub(e3, p3);\n"
        }
        _ => unreachable!("radix {r}"),
    }
}

/// Indents every line of `code` by `spaces`.
fn indent(code: &str, spaces: usize) -> String {
    let pad = " ".repeat(spaces);
    code.lines().map(|l| format!("{pad}{l}\n")).collect()
}

/// The FFT's stage functions, unrolled for one plan, and `fft(..)` calling them in order.
/// The first stage gathers both frames' samples and windows them (`windowed`); every
/// later stage multiplies by each twiddle power read from the stage tables (`twiddled`).
fn fft_stages(n: usize, shape: &FftShape) -> String {
    let t = shape.per_transform;
    let mut src = String::new();
    let mut calls = String::new();
    let mut ns = 1;
    let mut tw_off = 0;
    for (s, &r) in shape.radices.iter().enumerate() {
        let nb = n / r; // butterflies per transform
        let per = nb / t; // per invocation
        if s == 0 {
            // Inputs straight from the clip, windowed; outputs to buf at j·r + q (k = 0).
            src += "fn stage0(g: u32, t: u32, live: bool, base: u32, fa: u32, has_b: bool) {\n    if (live) {\n";
            for b in 0..per {
                let mut body = format!("let j = t + {}u;\n", b * t);
                for q in 0..r {
                    body += &format!(
                        "let x{q} = windowed(pair_raw(base, fa, has_b, j + {n}u), j + {n}u);\n",
                        n = q * nb
                    );
                }
                body += &butterfly(r);
                body += &format!("let idx = j * {r}u;\n");
                for q in 0..r {
                    body += &format!("buf[at(g, idx + {q}u)] = z{q};\n");
                }
                src += &indent(&format!("{{\n{}}}", indent(&body, 4)), 8);
            }
            src += "    }\n    workgroupBarrier();\n}\n\n";
            calls += "    stage0(g, t, live, base, fa, has_b);\n";
        } else {
            src += &format!("fn stage{s}(g: u32, t: u32, live: bool) {{\n");
            for b in 0..per {
                for q in 0..r {
                    src += &format!("    var y{b}_{q}: vec4<f32>;\n");
                }
            }
            src += "    if (live) {\n";
            for b in 0..per {
                let mut body = format!("let j = t + {}u;\nlet k = j & {}u;\n", b * t, ns - 1);
                body += "let x0 = buf[at(g, j)];\n";
                for q in 1..r {
                    // exp(-2πi·q·k/(ns·r)): entry [q - 1][k] of this stage's table.
                    body += &format!(
                        "let x{q} = twiddled(buf[at(g, j + {}u)], {}u + k);\n",
                        q * nb,
                        tw_off + (q - 1) * ns
                    );
                }
                body += &butterfly(r);
                for q in 0..r {
                    body += &format!("y{b}_{q} = z{q};\n");
                }
                src += &indent(&format!("{{\n{}}}", indent(&body, 4)), 8);
            }
            src += "    }\n    workgroupBarrier();\n    if (live) {\n";
            for b in 0..per {
                let mut body = format!(
                    "let j = t + {}u;\nlet k = j & {}u;\nlet idx = (j - k) * {r}u + k;\n",
                    b * t,
                    ns - 1
                );
                for q in 0..r {
                    body += &format!("buf[at(g, idx + {}u)] = y{b}_{q};\n", q * ns);
                }
                src += &indent(&format!("{{\n{}}}", indent(&body, 4)), 8);
            }
            src += "    }\n    workgroupBarrier();\n}\n\n";
            calls += &format!("    stage{s}(g, t, live);\n");
        }
        tw_off += (r - 1) * ns;
        ns *= r;
    }
    src + "fn fft(g: u32, t: u32, live: bool, base: u32, fa: u32, has_b: bool) {\n" + &calls + "}\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::Config;

    /// lavapipe's and many integrated GPUs' workgroup memory; NVIDIA allows 48 KiB.
    const WG_32K: usize = 32 * 1024;

    /// The source without its comments.
    fn code(src: &str) -> String {
        src.lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn leak_4k_specialisation() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let t = Tables::new(&plan);
        assert_eq!(t.sections, [0, 159, 319, 556, 588, 620]);
        assert_eq!(t.ints.len(), 652);
        let layout = Layout::choose(&plan, WORKGROUP, WG_32K).unwrap();
        // 512 = 8^3: 64 butterflies per stage; all 3 frame pairs side by side.
        let fft = layout.fft.clone().unwrap();
        assert_eq!(fft.radices, [8, 8, 8]);
        assert_eq!(
            (fft.per_transform, fft.pairs, layout.workgroup),
            (64, 3, 192)
        );
        // Double-word values (16 bytes) in buf: the tables (2 × 511 entries of 16 bytes)
        // do not fit beside three padded pairs in 32 KiB.
        assert!(fft.pad_banks && layout.mel_in_workgroup && !fft.twiddles_in_workgroup);
        // buf and the stage tables' stand-in; mel values.
        assert_eq!(
            layout.workgroup_bytes(&plan),
            (3 * 512 + 3 * 512 / 8 + 1) * 16 + 160 * 4 + 4
        );
        let s = shader(&plan, &t, &layout);
        assert!(s.contains("const N_FFT: u32 = 512u;"));
        assert!(s.contains("const OUT_KIND: u32 = 1u;"));
        assert!(s.contains("const PAIR_GROUPS: u32 = 1u;"));
        assert!(s.contains("const TW_IN_WG: bool = false;"));
        assert!(s.contains("const TW_LEN: u32 = 511u;"));
        assert!(s.contains("    stage0(g, t, live, base, fa, has_b);\n    stage1(g, t, live);\n    stage2(g, t, live);\n}"));
        // Every twiddle power is a table entry: the last stage (ns 64, after 7 + 56
        // twiddles) multiplies by exp(-2πi·7k/512) at [6][k].
        assert!(s.contains("let x7 = twiddled(buf[at(g, j + 448u)], 447u + k);"));
        assert!(!code(&s).contains("f64"));
        assert_eq!(t.twiddle.len(), 2 * 511);
        // Twiddle 9 (stage 2 after 7, q = 1, k = 2): exp(-2πi·2/64) as hi + lo, and hi's
        // split.
        let e = &t.twiddle[18..20];
        let a = -2.0 * std::f64::consts::PI * 2.0 / 64.0;
        assert_eq!([e[0][0], e[0][1]], [a.cos() as f32, a.sin() as f32]);
        assert!((e[0][0] as f64 + e[0][2] as f64 - a.cos()).abs() < 1e-14);
        assert_eq!(e[1][0] + e[1][2], e[0][0]);
        assert_eq!(e[1][1] + e[1][3], e[0][1]);
        // With 48 KiB (NVIDIA) the tables go into workgroup memory.
        let wide = Layout::choose(&plan, WORKGROUP, 48 * 1024).unwrap();
        assert!(wide.fft.unwrap().twiddles_in_workgroup);
        // A 12 KiB budget: one pair at a time, still padded, tables from storage.
        let small = Layout::choose(&plan, WORKGROUP, 12 * 1024).unwrap();
        let f = small.fft.unwrap();
        assert_eq!(
            (
                f.pairs,
                f.pad_banks,
                small.mel_in_workgroup,
                f.twiddles_in_workgroup
            ),
            (1, true, true, false)
        );
        // A cap of 32 invocations: two butterflies per invocation.
        let narrow = Layout::choose(&plan, 32, WG_32K).unwrap();
        assert_eq!(narrow.fft.unwrap().per_transform, 32);
        assert_eq!(narrow.workgroup, 32);
    }

    #[test]
    fn splits_are_exact_twelve_bit_halves() {
        for x in [
            1.0f32,
            std::f32::consts::FRAC_1_SQRT_2,
            -0.123_456_79,
            3.0e-5,
            8191.5,
        ] {
            let [hi, lo] = split12(x);
            assert_eq!(hi + lo, x);
            // Each half fits in 12 significant bits: its mantissa has 12 trailing zeros.
            for h in [hi, lo] {
                assert_eq!(h.to_bits() & 0xfff, 0, "{x}: {h}");
            }
        }
    }

    #[test]
    fn stage_radices_cover_every_power_of_two() {
        assert_eq!(radices(4), [4]);
        assert_eq!(radices(8), [8]);
        assert_eq!(radices(16), [8, 2]);
        assert_eq!(radices(32), [8, 4]);
        assert_eq!(radices(2048), [8, 8, 8, 4]);
        for bits in 2..16 {
            assert_eq!(radices(1 << bits).iter().product::<usize>(), 1 << bits);
        }
    }

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

    /// Every plan shape the backend may meet compiles: naga parses and validates the
    /// generated source (uniformity of barriers included) without a device and without
    /// the FLOAT64 capability.
    #[test]
    fn generated_shaders_validate_for_many_plans() {
        let mut plans = Vec::new();
        for n_fft in [4, 8, 16, 32, 64, 128, 255, 256, 400, 512, 1024, 2048] {
            for (frames_hint, n_mels) in [(1, 4), (5, 32), (40, 80)] {
                let mut c = Config::default();
                c.audio.sample_rate = 16000;
                c.audio.clip_seconds = 0.5;
                c.segment.long = mel_core::spec::StageSetting::OFF;
                c.segment.short = mel_core::spec::StageSetting::OFF;
                c.mel.n_fft = n_fft;
                c.mel.win_length = None;
                c.mel.hop_length = Some((8000 / frames_hint).max(1));
                c.mel.n_mels = n_mels.min(n_fft / 8).max(1);
                c.mel.f_max = None;
                for dtype in [Dtype::F16, Dtype::F32] {
                    c.output.dtype = dtype;
                    match MelPlan::from_config(&c) {
                        Ok(plan) => plans.push(plan),
                        Err(e) => println!("n_fft {n_fft}, {n_mels} mels: {e}"),
                    }
                }
            }
        }
        assert!(plans.len() >= 60, "only {} plans", plans.len());
        let mut validated = 0;
        for plan in &plans {
            for (max_inv, bytes) in [(WORKGROUP, WG_32K), (32, 48 * 1024), (1024, 16 * 1024)] {
                let Ok(layout) = Layout::choose(plan, max_inv, bytes) else {
                    continue;
                };
                assert!(layout.workgroup <= max_inv && layout.workgroup_bytes(plan) <= bytes);
                let src = shader(plan, &Tables::new(plan), &layout);
                let module = naga::front::wgsl::parse_str(&src).unwrap_or_else(|e| {
                    panic!("n_fft {}: {}", plan.n_fft(), e.emit_to_string(&src))
                });
                // No capabilities at all: in particular no FLOAT64 (the shader is f32 only,
                // so adapters without 64-bit floats, e.g. Apple's, run it).
                assert!(
                    !code(&src).contains("f64"),
                    "n_fft {}: f64 in the code",
                    plan.n_fft()
                );
                naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::empty(),
                )
                .validate(&module)
                .unwrap_or_else(|e| panic!("n_fft {}: {}", plan.n_fft(), e.emit_to_string(&src)));
                validated += 1;
            }
        }
        assert!(validated >= 150, "only {validated} shaders validated");
    }

    #[test]
    fn odd_segments_are_written_as_f32_and_converted_on_the_host() {
        let mut c = Config::default();
        c.mel.n_mels = 31; // 31 × 5 values per segment: odd
        let plan = MelPlan::from_config(&c).unwrap();
        assert_eq!(DeviceOut::for_plan(&plan), DeviceOut::F32);
        c.mel.n_mels = 32;
        c.output.dtype = Dtype::Bf16;
        assert_eq!(
            DeviceOut::for_plan(&MelPlan::from_config(&c).unwrap()),
            DeviceOut::Bf16
        );
    }
}
