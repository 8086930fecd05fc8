//! The wgpu backend through the shared conformance suite on whatever adapter wgpu finds:
//! in CI, Mesa's software Vulkan driver (lavapipe); on a GPU machine, the GPU. Without
//! an adapter it prints a skip; `MEL_REQUIRE_WGPU=1` (set by `.ci/run`) makes that a
//! failure. `MEL_WGPU_DEVICE` picks an adapter by index or name.

use mel_core::{Config, Dtype, MelBackend, MelPlan, OutputBuf};
use mel_cpu::CpuBackend;
use mel_tests::extra::{check_fft_sizes, check_odd_configs, f16_ulp_difference, noise_clips};
use mel_tests::{DTYPES, run_fast_suite, run_suite};
use mel_wgpu::{AdapterChoice, WgpuBackend};

/// The adapter `MEL_WGPU_DEVICE` names (an index or part of a name), else the best.
fn choice() -> AdapterChoice {
    let d: Option<mel_core::config::DeviceSelector> = std::env::var("MEL_WGPU_DEVICE")
        .ok()
        .and_then(|v| v.parse().ok());
    AdapterChoice::from(d.as_ref())
}

/// The adapter to test (any: the shader is f32 and needs no 64-bit floats), or `None`
/// after printing why not.
fn adapter() -> Option<AdapterChoice> {
    let all = mel_wgpu::adapters();
    for a in &all {
        println!("{a}");
    }
    if !all.is_empty() {
        return Some(choice());
    }
    let why = "no wgpu adapter";
    let required = std::env::var("MEL_REQUIRE_WGPU").is_ok_and(|v| v == "1");
    assert!(!required, "MEL_REQUIRE_WGPU=1 but {why}");
    println!("skipped: {why}");
    None
}

fn backend(plan: MelPlan, chunk: usize) -> Box<dyn MelBackend> {
    let b = WgpuBackend::new(plan, &choice(), chunk).expect("the wgpu backend starts");
    Box::new(b)
}

#[test]
fn wgpu_backend_conforms_on_every_golden_variant_and_dtype() {
    if adapter().is_none() {
        return;
    }
    // Chunks of 1 and of 64 clips: the first alternates both buffer sets within one batch.
    for chunk in [1, 64] {
        let failures = run_suite(|plan| match WgpuBackend::new(plan, &choice(), chunk) {
            Ok(b) => {
                println!("adapter: {}", b.adapter().name);
                Some(Box::new(b) as Box<dyn MelBackend>)
            }
            Err(e) => {
                println!("refused: {e}");
                None
            }
        });
        assert!(
            failures.is_empty(),
            "chunk {chunk}, non-conforming:\n{}",
            failures.join("\n")
        );
    }
}

#[test]
fn fast_precision_runs_the_exact_shader_within_the_fast_bound() {
    // wgpu has no plain-f32 shader: `fast` runs the compensated one, which must still
    // plan and run, and stays within the fast bound (far within it).
    if adapter().is_none() {
        return;
    }
    let failures = run_fast_suite(|plan| Some(backend(plan, 64)));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_adapter_keeps_compensated_arithmetic_exact() {
    if adapter().is_none() {
        return;
    }
    let plan = MelPlan::from_config(&Config::default()).unwrap();
    // The backend runs the check when it starts and refuses the adapter if it fails.
    let b = WgpuBackend::new(plan, &choice(), 1).expect("the wgpu backend starts");
    let c = b.arithmetic();
    println!(
        "{}: {} cases, shielded wrong {}, unshielded TwoSum lost its error in {} (the \
         compiler {} float arithmetic)",
        b.adapter().name,
        c.cases,
        c.shielded_wrong,
        c.unshielded_wrong,
        if c.unshielded_wrong > 0 {
            "reassociates"
        } else {
            "kept the unshielded"
        }
    );
    assert!(c.ok());
}

#[test]
fn wgpu_matches_the_direct_dft_reference_on_odd_configurations() {
    if adapter().is_none() {
        return;
    }
    for dtype in DTYPES {
        let failures = check_odd_configs(dtype, |plan| backend(plan, 2));
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

#[test]
fn wgpu_matches_the_reference_for_every_power_of_two_fft_size() {
    if adapter().is_none() {
        return;
    }
    let (failures, ran) = check_fft_sizes(|plan| match WgpuBackend::new(plan, &choice(), 2) {
        Ok(b) => Some(Box::new(b) as Box<dyn MelBackend>),
        Err(e) => {
            println!("refused: {e}");
            None
        }
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Up to 1024 points fits every adapter with 32 KiB of workgroup memory (2048 needs
    // 34,848 bytes: the compensated values take 16 bytes each).
    for n in [4, 8, 16, 32, 64, 128, 256, 512, 1024] {
        assert!(ran.contains(&n), "n_fft {n} did not run (ran: {ran:?})");
    }
}

#[test]
fn wgpu_agrees_with_the_cpu_backend_on_a_random_batch() {
    if adapter().is_none() {
        return;
    }
    let plan = MelPlan::from_config(&Config::default()).unwrap();
    assert_eq!(plan.dtype(), Dtype::F16);
    let clips = 24;
    let input = noise_clips(&plan, clips);
    let mut gpu = OutputBuf::zeros(plan.dtype(), clips * plan.values_per_clip());
    let mut cpu = OutputBuf::zeros(plan.dtype(), clips * plan.values_per_clip());
    backend(plan.clone(), 5)
        .compute(&input, gpu.as_mut_slice())
        .unwrap();
    CpuBackend::new(plan.clone())
        .compute(&input, cpu.as_mut_slice())
        .unwrap();
    let (worst, differ) = f16_ulp_difference(&gpu, &cpu);
    println!(
        "{differ} of {} f16 values differ from the CPU's, by at most {worst} ulp",
        gpu.len()
    );
    assert!(worst <= 1, "wgpu and CPU differ by {worst} f16 ulp");
}

#[test]
fn bad_arguments_and_adapters_are_clear_errors() {
    let plan = MelPlan::from_config(&Config::default()).unwrap();
    let e = WgpuBackend::new(plan.clone(), &AdapterChoice::Index(99), 1)
        .err()
        .expect("adapter 99 does not exist")
        .to_string();
    assert!(e.contains("wgpu"), "{e}");
    let e = WgpuBackend::new(plan.clone(), &AdapterChoice::Name("no such gpu".into()), 1)
        .err()
        .expect("no adapter has that name")
        .to_string();
    assert!(e.contains("wgpu"), "{e}");
    if adapter().is_none() {
        return;
    }
    let mut b = WgpuBackend::new(plan.clone(), &choice(), 4).unwrap();
    let mut out = OutputBuf::zeros(plan.dtype(), plan.values_per_clip());
    let e = b
        .compute(&vec![0.0; plan.clip_samples() + 1], out.as_mut_slice())
        .unwrap_err()
        .to_string();
    assert!(e.contains("whole number"), "{e}");
    let mut wrong = OutputBuf::zeros(Dtype::F32, plan.values_per_clip());
    let e = b
        .compute(&vec![0.0; plan.clip_samples()], wrong.as_mut_slice())
        .unwrap_err()
        .to_string();
    assert!(e.contains("the plan says f16"), "{e}");
    // A configuration whose workgroup would not fit: n_fft 8192 needs 128 KiB.
    let mut c = Config::default();
    c.segment.long = mel_core::spec::StageSetting::OFF;
    c.segment.short = mel_core::spec::StageSetting::OFF;
    c.mel.n_fft = 8192;
    c.mel.hop_length = Some(2048);
    let big = MelPlan::from_config(&c).unwrap();
    let e = WgpuBackend::new(big, &choice(), 1)
        .err()
        .expect("too much workgroup memory")
        .to_string();
    assert!(e.contains("workgroup memory"), "{e}");
}
