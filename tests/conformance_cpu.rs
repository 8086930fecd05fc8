//! The CPU backend through the shared conformance suite, plus its agreement with the
//! core's direct-DFT f64 reference on configurations the goldens do not cover.

use mel_core::config::{PadMode, Stage, StageSetting, WindowKind};
use mel_core::dsp::reference;
use mel_core::{Config, Dtype, LogScale, MelBackend, MelPlan, OutputBuf};
use mel_cpu::CpuBackend;
use mel_tests::{compare, goldens, run_suite};

#[test]
fn cpu_backend_conforms_on_every_golden_variant_and_dtype() {
    let failures = run_suite(|plan| Some(Box::new(CpuBackend::new(plan)) as Box<dyn MelBackend>));
    assert!(
        failures.is_empty(),
        "non-conforming:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_golden_variant_is_loaded() {
    let g = goldens();
    assert!(
        g.len() >= 9,
        "expected the nine documented variants, found {}",
        g.len()
    );
    for v in &g {
        let plan = MelPlan::new(&v.config).unwrap();
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
    // slaney scale with power 1 and ln: configurations beyond the goldens.
    let mut configs = Vec::new();
    let mut c = Config::default();
    c.audio.sample_rate = 8000;
    c.audio.clip_seconds = 0.1;
    c.segment.long = StageSetting::OFF;
    c.segment.short = StageSetting::On(Stage {
        window: 300,
        hop: 100,
    });
    c.mel.n_fft = 255;
    c.mel.win_length = Some(200);
    c.mel.hop_length = Some(50);
    c.mel.window = WindowKind::Hamming;
    c.mel.pad_mode = PadMode::Constant;
    c.mel.n_mels = 20;
    c.mel.f_min = 100.0;
    c.mel.f_max = Some(3900.0);
    configs.push(c.clone());
    c.mel.power = 1.0;
    c.mel.mel_scale = mel_core::config::MelScale::Slaney;
    c.log = LogScale::Ln { offset: 1e-3 };
    configs.push(c.clone());
    c.mel.center = false;
    c.log = LogScale::Db {
        amin: 1e-10,
        top_db: Some(30.0),
    };
    configs.push(c);

    for (i, mut config) in configs.into_iter().enumerate() {
        config.output.dtype = Dtype::F32;
        let plan = MelPlan::new(&config).unwrap();
        let clip: Vec<f64> = (0..plan.clip_samples)
            .map(|n| {
                ((n as f64 * 0.37).sin() * 0.4 + (n as f64 * 0.011).cos() * 0.2)
                    * ((n % 97) as f64 / 97.0)
            })
            .map(|x| (x * 32768.0).round() / 32768.0)
            .collect();
        let expected = reference::clip_mel(&plan, &clip);
        let input: Vec<f32> = clip.iter().map(|&x| x as f32).collect();
        let mut out = OutputBuf::zeros(Dtype::F32, plan.values_per_clip());
        CpuBackend::new(plan.clone())
            .compute(&input, out.as_mut_slice())
            .unwrap();
        let c = compare(&plan, &out, &expected);
        assert!(
            c.first_mismatch.is_none(),
            "config {i}: {}",
            c.first_mismatch.unwrap()
        );
        assert!(
            c.compared > plan.values_per_clip() / 2,
            "config {i}: too few bins compared"
        );
    }
}

#[test]
fn results_do_not_depend_on_thread_count_or_batch_split() {
    let g = &goldens()[0];
    let mut config = g.config.clone();
    config.output.dtype = Dtype::F32;
    let plan = MelPlan::new(&config).unwrap();
    let run = |threads: usize, input: &[f32]| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut out = OutputBuf::zeros(
            Dtype::F32,
            input.len() / plan.clip_samples * plan.values_per_clip(),
        );
        pool.install(|| CpuBackend::new(plan.clone()).compute(input, out.as_mut_slice()))
            .unwrap();
        out
    };
    let all = run(2, &g.input);
    let one = run(1, &g.input);
    assert_eq!(all, one);
    let second = run(1, &g.input[plan.clip_samples..]);
    assert_eq!(second.as_bytes(), &all.as_bytes()[plan.bytes_per_clip()..]);
}

#[test]
fn wrong_buffer_sizes_are_errors_not_panics() {
    let plan = MelPlan::new(&Config::default()).unwrap();
    let mut b = CpuBackend::new(plan.clone());
    let mut out = OutputBuf::zeros(plan.dtype, plan.values_per_clip());
    assert!(
        b.compute(&vec![0.0; plan.clip_samples + 1], out.as_mut_slice())
            .is_err()
    );
    let mut short = OutputBuf::zeros(plan.dtype, 10);
    assert!(
        b.compute(&vec![0.0; plan.clip_samples], short.as_mut_slice())
            .is_err()
    );
    let mut wrong = OutputBuf::zeros(Dtype::F32, plan.values_per_clip());
    assert!(
        b.compute(&vec![0.0; plan.clip_samples], wrong.as_mut_slice())
            .is_err()
    );
}
