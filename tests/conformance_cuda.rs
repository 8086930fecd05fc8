//! The CUDA backend through the shared conformance suite, on a GPU where one exists
//! (else a printed skip; `MEL_REQUIRE_GPU=1` makes that a failure), and its kernel
//! compiled to PTX for every golden configuration wherever NVRTC exists (no GPU needed;
//! `MEL_REQUIRE_NVRTC=1` makes a missing NVRTC a failure).

use mel_core::{Config, MelBackend, MelPlan, OutputBuf};
use mel_cpu::CpuBackend;
use mel_cuda::{CudaBackend, Shape, compile_ptx};
use mel_tests::extra::{
    check_fft_sizes, check_odd_configs, f16_ulp_difference, noise_clips, odd_configs,
};
use mel_tests::{DTYPES, goldens, run_suite};

fn require(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

/// The device to test (`MEL_CUDA_DEVICE`, default 0), or `None` after printing why not.
fn device() -> Option<usize> {
    match mel_cuda::devices() {
        Ok(d) if !d.is_empty() => {
            let i = std::env::var("MEL_CUDA_DEVICE")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            println!("CUDA device {i}: {:?}", d.get(i));
            Some(i)
        }
        Ok(_) => skip("no CUDA device"),
        Err(e) => skip(&format!("no CUDA device ({e})")),
    }
}

fn skip(why: &str) -> Option<usize> {
    assert!(!require("MEL_REQUIRE_GPU"), "MEL_REQUIRE_GPU=1 but {why}");
    println!("skipped: {why}");
    None
}

#[test]
fn cuda_backend_conforms_on_every_golden_variant_and_dtype() {
    let Some(dev) = device() else { return };
    // Chunks of 1 and of 64 clips: the first alternates both streams within one batch.
    for chunk in [1, 64] {
        let failures = run_suite(|plan| match CudaBackend::new(plan, dev, chunk) {
            Ok(b) => Some(Box::new(b) as Box<dyn MelBackend>),
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
fn cuda_matches_the_direct_dft_reference_on_odd_configurations() {
    let Some(dev) = device() else { return };
    for dtype in DTYPES {
        let failures = check_odd_configs(dtype, |plan| {
            Box::new(CudaBackend::new(plan, dev, 2).expect("odd configurations run"))
        });
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

#[test]
fn cuda_matches_the_reference_for_every_power_of_two_fft_size() {
    let Some(dev) = device() else { return };
    let (failures, ran) = check_fft_sizes(|plan| match CudaBackend::new(plan, dev, 2) {
        Ok(b) => Some(Box::new(b) as Box<dyn MelBackend>),
        Err(e) => {
            println!("refused: {e}");
            None
        }
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(ran.contains(&512) && ran.len() >= 8, "ran only {ran:?}");
}

#[test]
fn cuda_agrees_with_the_cpu_backend_on_a_large_random_batch() {
    let Some(dev) = device() else { return };
    let plan = MelPlan::from_config(&Config::default()).unwrap();
    let clips = 300;
    let input = noise_clips(&plan, clips);
    let mut gpu = OutputBuf::zeros(plan.dtype(), clips * plan.values_per_clip());
    let mut cpu = OutputBuf::zeros(plan.dtype(), clips * plan.values_per_clip());
    CudaBackend::new(plan.clone(), dev, 128)
        .unwrap()
        .compute(&input, gpu.as_mut_slice())
        .unwrap();
    CpuBackend::new(plan.clone())
        .compute(&input, cpu.as_mut_slice())
        .unwrap();
    let (worst_ulps, differ) = f16_ulp_difference(&gpu, &cpu);
    println!(
        "{differ} of {} f16 values differ from the CPU's, by at most {worst_ulps} ulp",
        gpu.len()
    );
    assert!(
        worst_ulps <= 1,
        "GPU and CPU differ by {worst_ulps} f16 ulp"
    );
}

#[test]
fn device_errors_are_clear_and_never_panic() {
    let plan = MelPlan::from_config(&Config::default()).unwrap();
    match mel_cuda::devices() {
        Ok(d) if !d.is_empty() => {
            let e = CudaBackend::new(plan, 99, 1)
                .err()
                .expect("device 99 does not exist")
                .to_string();
            assert!(
                e.contains("--device 99") && e.contains("CUDA devices"),
                "{e}"
            );
        }
        _ => {
            let e = CudaBackend::new(plan, 0, 1)
                .err()
                .expect("no device: an error")
                .to_string();
            assert!(e.contains("cuda") || e.contains("CUDA"), "{e}");
            println!("without a device: {e}");
        }
    }
}

#[test]
fn kernel_compiles_to_ptx_for_every_golden_configuration() {
    if let Err(e) = mel_cuda::driver::ensure_nvrtc() {
        assert!(!require("MEL_REQUIRE_NVRTC"), "MEL_REQUIRE_NVRTC=1 but {e}");
        println!("skipped: {e}");
        return;
    }
    let mut n = 0;
    let mut configs: Vec<Config> = goldens().into_iter().map(|g| g.config).collect();
    configs.extend(odd_configs());
    for config in configs {
        for dtype in DTYPES {
            let mut c = config.clone();
            c.output.dtype = dtype;
            let plan = MelPlan::from_config(&c).unwrap();
            let shape = Shape::choose(&plan, 227 * 1024).unwrap();
            let ptx = compile_ptx(&plan, shape, "compute_90")
                .unwrap_or_else(|e| panic!("{dtype:?} n_fft {}: {e}", plan.n_fft()));
            assert!(ptx.to_src().contains(".entry mel_kernel"));
            n += 1;
        }
    }
    println!("compiled {n} kernels to PTX");
}
