//! The code generation: the complete WGSL source for one plan and layout, as the plan's
//! constants, `common.wgsl`, `dw.wgsl`, and either `fft.wgsl` with the FFT's stage
//! functions generated here (unrolled: every loop bound and index a constant) or
//! `dft.wgsl` (as NVRTC macros specialise the CUDA kernels).

use mel_core::MelPlan;
use mel_core::dsp::f32_dw;
use mel_core::spec::{LogScale, PadMode};

use crate::layout::{DFT_FRAMES, FftShape, Layout};
use crate::output::DeviceOut;
use crate::tables::{Tables, split12};

/// What both paths share: bindings, sample access, log, top_db, output conversion.
pub const COMMON_SOURCE: &str = include_str!("common.wgsl");

/// Compensated (double-word) f32 arithmetic, shielded from compilers' reassociation.
pub const DW_SOURCE: &str = include_str!("dw.wgsl");

/// The one-pass path for a power-of-two `n_fft` (its stages are generated here).
pub const FFT_SOURCE: &str = include_str!("fft.wgsl");

/// The two-pass direct-DFT path for any `n_fft`.
pub const DFT_SOURCE: &str = include_str!("dft.wgsl");

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
    let mut src = String::from("// Generated for one plan by mel-wgpu (codegen.rs).\n");
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
            src += "\n// The FFT's stages, generated by codegen.rs.\n";
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
    use crate::layout::WORKGROUP;
    use mel_core::{Config, Dtype};

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
}
