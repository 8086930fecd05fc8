//! The CPU backend through the shared conformance suite, plus its agreement with the
//! core's direct-DFT f64 reference on configurations the goldens do not cover. Each check
//! runs with the CPU's best instruction set (the default) and with the portable kernels.

use mel_core::{Config, Dtype, MelBackend, MelPlan, OutputBuf};
use mel_cpu::{CpuBackend, CpuOptions, FloatWidth, Isa, Transform};
use mel_tests::extra::{check_fft_sizes, check_odd_configs};
use mel_tests::{DTYPES, compare, goldens, run_fast_suite, run_suite};

/// The instruction sets to check: the default (the CPU's best) and the portable one.
fn isas() -> Vec<Isa> {
    let best = Isa::detect();
    if best == Isa::Portable {
        println!("note: this CPU has only the portable kernels");
        vec![Isa::Portable]
    } else {
        vec![best, Isa::Portable]
    }
}

fn backend(plan: MelPlan, isa: Isa) -> Box<dyn MelBackend> {
    let options = CpuOptions {
        isa,
        ..CpuOptions::default()
    };
    Box::new(CpuBackend::with_options(plan, options).expect("an available instruction set"))
}

#[test]
fn cpu_backend_conforms_on_every_golden_variant_and_dtype() {
    for isa in isas() {
        println!("instruction set {isa:?}");
        let failures = run_suite(|plan| Some(backend(plan, isa)));
        assert!(
            failures.is_empty(),
            "{isa:?} non-conforming:\n{}",
            failures.join("\n")
        );
    }
}

#[test]
fn fast_precision_is_within_torchaudios_own_f32_error_on_every_golden() {
    for isa in isas() {
        println!("instruction set {isa:?}");
        let failures = run_fast_suite(|plan| {
            let b = backend(plan.clone(), isa);
            // `fast` is the f32 transform where the batched FFT covers the size (512
            // here), f64 elsewhere (speech-16k's 400, where realfft's f32 misses).
            let cpu = CpuBackend::with_options(
                plan.clone(),
                CpuOptions {
                    isa,
                    ..CpuOptions::default()
                },
            )
            .unwrap();
            let want = if plan.n_fft().is_power_of_two() {
                FloatWidth::F32
            } else {
                FloatWidth::F64
            };
            assert_eq!(cpu.precision(), want, "n_fft {}", plan.n_fft());
            Some(b)
        });
        assert!(
            failures.is_empty(),
            "{isa:?} fast precision over torchaudio's f32 error:\n{}",
            failures.join("\n")
        );
    }
}

#[test]
fn the_f32_transform_stays_within_its_documented_error() {
    // A float32 transform misses the 0.01 dB bound on bins ~100 dB below their
    // spectrogram's peak (docs/numerics.md): this pins what it does reach, so
    // the option stays measured, not merely present.
    for isa in isas() {
        for transform in [Transform::Auto, Transform::RealFft] {
            let mut worst = 0f64;
            for g in goldens() {
                let mut config = g.config.clone();
                config.output.dtype = Dtype::F32;
                let plan = MelPlan::from_config(&config).unwrap();
                let options = CpuOptions {
                    isa,
                    transform,
                    precision: Some(FloatWidth::F32),
                };
                let mut b = CpuBackend::with_options(plan.clone(), options).unwrap();
                let mut out = OutputBuf::zeros(Dtype::F32, g.clips * plan.values_per_clip());
                b.compute(&g.input, out.as_mut_slice()).unwrap();
                let c = compare(&plan, &out, &g.expected);
                println!(
                    "{isa:?} {transform:?} f32 transform, {}: worst {:.5} dB",
                    g.name, c.worst_error
                );
                worst = worst.max(c.worst_error);
            }
            assert!(worst < 0.05, "{isa:?} {transform:?}: worst {worst} dB");
        }
    }
}

#[test]
fn every_golden_variant_is_loaded() {
    let g = goldens();
    let count = |set: &str| g.iter().filter(|v| v.set == set).count();
    assert_eq!(count("torchaudio"), 9, "the nine definition variants");
    // The stress set covers both presets' FFT sizes (512 and the non-power-of-two 400).
    let stress_ffts: Vec<usize> = g
        .iter()
        .filter(|v| v.set == "stress")
        .map(|v| v.config.mel.n_fft)
        .collect();
    assert_eq!(stress_ffts, [512, 400]);
    for v in &g {
        // (f32: the no-log variant's energies do not fit the preset's f16, which is refused)
        let mut config = v.config.clone();
        config.output.dtype = Dtype::F32;
        let plan = MelPlan::from_config(&config).unwrap();
        let mut shape = vec![v.clips];
        shape.extend(plan.clip_shape());
        assert_eq!(
            shape, v.shape,
            "{}: plan shape and fixture shape differ",
            v.name
        );
    }
}

#[test]
fn cpu_matches_direct_dft_reference_on_odd_configurations() {
    // Odd FFT size, hamming window shorter than n_fft, constant padding, one stage only,
    // slaney scale with power 1 and ln, top_db, no centring, an odd segment size:
    // configurations beyond the goldens, the same ones every GPU backend is checked on.
    for isa in isas() {
        for dtype in DTYPES {
            let failures = check_odd_configs(dtype, |plan| backend(plan, isa));
            assert!(failures.is_empty(), "{isa:?}: {}", failures.join("\n"));
        }
    }
}

#[test]
fn cpu_matches_the_reference_for_every_power_of_two_fft_size() {
    for isa in isas() {
        let (failures, ran) = check_fft_sizes(|plan| Some(backend(plan, isa)));
        assert!(failures.is_empty(), "{isa:?}: {}", failures.join("\n"));
        assert_eq!(ran, [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]);
    }
}

#[test]
fn results_do_not_depend_on_thread_count_or_batch_split() {
    let g = &goldens()[0];
    let mut config = g.config.clone();
    config.output.dtype = Dtype::F32;
    let plan = MelPlan::from_config(&config).unwrap();
    for isa in isas() {
        for precision in [FloatWidth::F64, FloatWidth::F32] {
            same_for_any_split(&plan, &g.input, isa, precision);
        }
    }
}

fn same_for_any_split(plan: &MelPlan, input: &[f32], isa: Isa, precision: FloatWidth) {
    let options = CpuOptions {
        isa,
        precision: Some(precision),
        ..CpuOptions::default()
    };
    let run = |threads: usize, input: &[f32]| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut out = OutputBuf::zeros(
            Dtype::F32,
            input.len() / plan.clip_samples() * plan.values_per_clip(),
        );
        pool.install(|| {
            CpuBackend::with_options(plan.clone(), options)
                .unwrap()
                .compute(input, out.as_mut_slice())
        })
        .unwrap();
        out
    };
    let all = run(2, input);
    let one = run(1, input);
    assert_eq!(all, one, "{isa:?} {precision:?}");
    let second = run(1, &input[plan.clip_samples()..]);
    assert_eq!(
        second.as_bytes(),
        &all.as_bytes()[plan.bytes_per_clip()..],
        "{isa:?} {precision:?}"
    );
}

#[test]
fn wrong_buffer_sizes_are_errors_not_panics() {
    let plan = MelPlan::from_config(&Config::default()).unwrap();
    let mut b = CpuBackend::new(plan.clone());
    let mut out = OutputBuf::zeros(plan.dtype(), plan.values_per_clip());
    assert!(
        b.compute(&vec![0.0; plan.clip_samples() + 1], out.as_mut_slice())
            .is_err()
    );
    let mut short = OutputBuf::zeros(plan.dtype(), 10);
    assert!(
        b.compute(&vec![0.0; plan.clip_samples()], short.as_mut_slice())
            .is_err()
    );
    let mut wrong = OutputBuf::zeros(Dtype::F32, plan.values_per_clip());
    assert!(
        b.compute(&vec![0.0; plan.clip_samples()], wrong.as_mut_slice())
            .is_err()
    );
}
