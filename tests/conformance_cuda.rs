//! The CUDA backend through the shared conformance suite with each kernel (the verified
//! f64 one and the compensated f32 one), on a GPU where one exists (else a printed
//! skip; `MEL_REQUIRE_GPU=1` makes that a failure; `MEL_CUDA_KERNELS=f32` runs one
//! kernel only), and both kernels compiled to PTX for every golden and odd
//! configuration wherever NVRTC exists (no GPU needed; `MEL_REQUIRE_NVRTC=1` makes a
//! missing NVRTC a failure). Without a GPU, both kernels' code also runs through the
//! same checks on the CPU, under the host emulation of CUDA's thread model
//! (`mel_cuda::emu`: fibers for threads, strict barriers, both thread orders), wherever a
//! C++17 compiler exists (`MEL_REQUIRE_CXX=1` makes a missing one a failure).

use mel_core::{Config, MelBackend, MelPlan, OutputBuf};
use mel_cpu::CpuBackend;
use mel_cuda::emu::EmuBackend;
use mel_cuda::{CudaBackend, CudaKernel, CudaOptions, DeviceLimits, Shape, compile_ptx};
use mel_tests::extra::{
    check_fft_sizes, check_odd_configs, f16_ulp_difference, noise_clips, odd_configs,
};
use mel_tests::{DTYPES, goldens, run_fast_suite, run_suite};
use rayon::prelude::*;

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

/// The kernels to test: both, or those `MEL_CUDA_KERNELS` lists (`f64,f32`).
fn kernels() -> Vec<CudaKernel> {
    match std::env::var("MEL_CUDA_KERNELS") {
        Ok(v) => v
            .split(',')
            .map(|k| k.trim().parse().expect("MEL_CUDA_KERNELS: f64 and/or f32"))
            .collect(),
        Err(_) => CudaKernel::ALL.to_vec(),
    }
}

/// The backend with `kernel` on device `dev`, chunks of `chunk` clips.
fn backend(
    plan: MelPlan,
    dev: usize,
    chunk: usize,
    kernel: CudaKernel,
) -> mel_core::Result<CudaBackend> {
    let options = CudaOptions {
        kernel: Some(kernel),
        shape: None,
    };
    let b = CudaBackend::with_options(plan, dev, chunk, options)?;
    println!(
        "kernel {} on {}: shape {:?}",
        b.kernel().name(),
        b.device_name(),
        b.shape()
    );
    Ok(b)
}

#[test]
fn cuda_backend_conforms_on_every_golden_variant_and_dtype() {
    let Some(dev) = device() else { return };
    for kernel in kernels() {
        // Chunks of 1 and of 64 clips: the first alternates both streams within one batch.
        for chunk in [1, 64] {
            let failures = run_suite(|plan| match backend(plan, dev, chunk, kernel) {
                Ok(b) => Some(Box::new(b) as Box<dyn MelBackend>),
                Err(e) => {
                    println!("refused: {e}");
                    None
                }
            });
            assert!(
                failures.is_empty(),
                "{} kernel, chunk {chunk}, non-conforming:\n{}",
                kernel.name(),
                failures.join("\n")
            );
        }
    }
}

#[test]
fn cuda_fast_precision_stays_within_the_fast_bound() {
    let Some(dev) = device() else { return };
    let failures = run_fast_suite(|plan| {
        let b = CudaBackend::with_options(plan, dev, 64, CudaOptions::default()).ok()?;
        println!("fast: kernel {}", b.kernel().name());
        Some(Box::new(b) as Box<dyn MelBackend>)
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn cuda_matches_the_direct_dft_reference_on_odd_configurations() {
    let Some(dev) = device() else { return };
    for kernel in kernels() {
        for dtype in DTYPES {
            let failures = check_odd_configs(dtype, |plan| {
                Box::new(backend(plan, dev, 2, kernel).expect("odd configurations run"))
            });
            assert!(
                failures.is_empty(),
                "{} kernel: {}",
                kernel.name(),
                failures.join("\n")
            );
        }
    }
}

#[test]
fn cuda_matches_the_reference_for_every_power_of_two_fft_size() {
    let Some(dev) = device() else { return };
    for kernel in kernels() {
        let (failures, ran) = check_fft_sizes(|plan| match backend(plan, dev, 2, kernel) {
            Ok(b) => Some(Box::new(b) as Box<dyn MelBackend>),
            Err(e) => {
                println!("refused: {e}");
                None
            }
        });
        assert!(
            failures.is_empty(),
            "{} kernel: {}",
            kernel.name(),
            failures.join("\n")
        );
        assert!(ran.contains(&512) && ran.len() >= 8, "ran only {ran:?}");
    }
}

#[test]
fn cuda_agrees_with_the_cpu_backend_on_a_large_random_batch() {
    let Some(dev) = device() else { return };
    let plan = MelPlan::from_config(&Config::default()).unwrap();
    let clips = 300;
    let input = noise_clips(&plan, clips);
    let mut cpu = OutputBuf::zeros(plan.dtype(), clips * plan.values_per_clip());
    CpuBackend::new(plan.clone())
        .compute(&input, cpu.as_mut_slice())
        .unwrap();
    for kernel in kernels() {
        let mut gpu = OutputBuf::zeros(plan.dtype(), clips * plan.values_per_clip());
        let mut b = backend(plan.clone(), dev, 128, kernel).unwrap();
        b.compute(&input, gpu.as_mut_slice()).unwrap();
        let (worst_ulps, differ) = f16_ulp_difference(&gpu, &cpu);
        println!(
            "{} kernel: {differ} of {} f16 values differ from the CPU's, by at most {worst_ulps} ulp",
            kernel.name(),
            gpu.len()
        );
        assert!(
            worst_ulps <= 1,
            "{} kernel: GPU and CPU differ by {worst_ulps} f16 ulp",
            kernel.name()
        );
        // Three chunks of at most 128 clips: each adds its copies and kernel to the times.
        let t = b.device_times().expect("the CUDA backend times its device");
        println!(
            "device times: upload {:.4} s, kernel {:.4} s, download {:.4} s",
            t.upload_seconds, t.kernel_seconds, t.download_seconds
        );
        assert!(t.upload_seconds > 0.0 && t.kernel_seconds > 0.0 && t.download_seconds > 0.0);
    }
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
            // A library error names the device asked for and those there are (the CLI
            // names its flag).
            assert!(
                e.contains("no CUDA device 99") && e.contains("device 0"),
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
fn both_kernels_compile_to_ptx_for_every_golden_and_odd_configuration() {
    if let Err(e) = mel_cuda::driver::ensure_nvrtc() {
        assert!(!require("MEL_REQUIRE_NVRTC"), "MEL_REQUIRE_NVRTC=1 but {e}");
        println!("skipped: {e}");
        return;
    }
    let mut configs: Vec<Config> = goldens().into_iter().map(|g| g.config).collect();
    configs.extend(odd_configs());
    configs.extend(mel_tests::extra::fft_size_configs());
    for kernel in CudaKernel::ALL {
        let mut n = 0;
        for config in &configs {
            for dtype in DTYPES {
                let mut c = config.clone();
                c.output.dtype = dtype;
                let Some(plan) = mel_tests::plan_in_dtype(&c) else {
                    continue;
                };
                let shape = Shape::choose(&plan, kernel, &DeviceLimits::H100, 64).unwrap();
                let ptx = compile_ptx(&plan, kernel, shape, "compute_90").unwrap_or_else(|e| {
                    panic!("{} {dtype:?} n_fft {}: {e}", kernel.name(), plan.n_fft())
                });
                let src = ptx.to_src();
                assert!(src.contains(&format!(".entry {}", kernel.entry())));
                if kernel == CudaKernel::F32 {
                    // No double anywhere: no f64 registers or instructions in the PTX.
                    assert!(
                        !src.contains(".f64"),
                        "f32 kernel, n_fft {}: f64 in the PTX",
                        plan.n_fft()
                    );
                }
                n += 1;
            }
        }
        println!("compiled {n} {} kernels to PTX", kernel.name());
    }
    // Registers and spills of both kernels for leak-4k in f16 (context for BENCHMARKS.md).
    let plan = MelPlan::from_config(&Config::default()).unwrap();
    for (limits, sm) in [
        (DeviceLimits::H100, "sm_90"),
        (DeviceLimits::RTX_4090, "sm_89"),
    ] {
        for kernel in CudaKernel::ALL {
            let shape = Shape::choose(&plan, kernel, &limits, 256).unwrap();
            match mel_cuda::ptxas_report(&plan, kernel, shape, sm) {
                Ok(r) => println!("{} kernel, {sm}, {shape:?}:\n{r}", kernel.name()),
                Err(e) => println!("{} kernel, {sm}: no ptxas report ({e})", kernel.name()),
            }
        }
    }
}

/// The C++ compiler for the emulator: `CXX`, else the first that runs.
fn cxx() -> mel_core::Result<String> {
    mel_cuda::emu::compiler(std::env::var("CXX").ok().as_deref())
}

/// Whether the host emulation can run (a C++17 compiler exists), after printing why not.
fn emulator() -> bool {
    match cxx() {
        Ok(_) => true,
        Err(e) => {
            assert!(!require("MEL_REQUIRE_CXX"), "MEL_REQUIRE_CXX=1 but {e}");
            println!("skipped: {e}");
            false
        }
    }
}

/// `kernel` for `plan` in the emulator, in the shape chosen for `device`: for chunks of
/// 64 clips (what melctl uses at least), except for f32 output, whose shape is chosen for
/// chunks of 1 clip (smaller blocks, as the GPU tests' first chunk size gets).
fn emulated(plan: MelPlan, kernel: CudaKernel, device: &DeviceLimits) -> EmuBackend {
    let chunk = if plan.dtype() == mel_core::Dtype::F32 {
        1
    } else {
        64
    };
    let shape = Shape::choose(&plan, kernel, device, chunk).expect("a shape fits");
    let cxx = cxx().expect("a C++ compiler");
    EmuBackend::new(plan, kernel, shape, &cxx).expect("the emulated kernel builds")
}

/// Builds the emulated programs of `configs` × `dtypes` × `kernels` in parallel (each
/// build is cached by content, so the checks that follow find them ready).
fn prebuild(
    configs: &[Config],
    dtypes: &[mel_core::Dtype],
    kernels: &[CudaKernel],
    device: &DeviceLimits,
) {
    let mut jobs = Vec::new();
    for c in configs {
        for &dtype in dtypes {
            for &k in kernels {
                let mut c = c.clone();
                c.output.dtype = dtype;
                jobs.extend(mel_tests::plan_in_dtype(&c).map(|plan| (plan, k)));
            }
        }
    }
    jobs.into_par_iter().for_each(|(plan, k)| {
        emulated(plan, k, device);
    });
}

#[test]
fn both_kernels_conform_in_the_host_emulator() {
    if !emulator() {
        return;
    }
    let configs: Vec<Config> = goldens().into_iter().map(|g| g.config).collect();
    let kernels = kernels();
    prebuild(&configs, &DTYPES, &kernels, &DeviceLimits::H100);
    for kernel in kernels {
        let failures = run_suite(|plan| {
            let b = emulated(plan, kernel, &DeviceLimits::H100);
            println!("emulated {} kernel, shape {:?}", kernel.name(), b.shape());
            Some(Box::new(b) as Box<dyn MelBackend>)
        });
        assert!(
            failures.is_empty(),
            "emulated {} kernel, non-conforming:\n{}",
            kernel.name(),
            failures.join("\n")
        );
    }
}

#[test]
fn fast_precision_runs_the_chosen_kernel_within_the_fast_bound_in_the_host_emulator() {
    // CUDA has no plain-f32 kernel: `fast` runs the kernel the device suggests (here
    // both, as a GPU might suggest either), within the fast bound.
    if !emulator() {
        return;
    }
    let configs: Vec<Config> = goldens().into_iter().map(|g| g.config).collect();
    let kernels = kernels();
    prebuild(
        &configs,
        &[mel_core::Dtype::F32],
        &kernels,
        &DeviceLimits::H100,
    );
    for kernel in kernels {
        let failures = run_fast_suite(|plan| {
            Some(Box::new(emulated(plan, kernel, &DeviceLimits::H100)) as Box<dyn MelBackend>)
        });
        assert!(
            failures.is_empty(),
            "emulated {} kernel: {}",
            kernel.name(),
            failures.join("\n")
        );
    }
}

#[test]
fn both_kernels_match_the_reference_on_odd_configurations_and_fft_sizes_in_the_host_emulator() {
    if !emulator() {
        return;
    }
    // Shapes chosen for a 100 KiB-per-SM GPU here (the goldens use the H100's).
    let device = DeviceLimits::RTX_4090;
    let kernels = kernels();
    // The odd configurations run in every dtype, the FFT sizes in f32 (check_fft_sizes).
    prebuild(&odd_configs(), &DTYPES, &kernels, &device);
    let fft_sizes = mel_tests::extra::fft_size_configs();
    prebuild(&fft_sizes, &[mel_core::Dtype::F32], &kernels, &device);
    for kernel in kernels {
        for dtype in DTYPES {
            let failures =
                check_odd_configs(dtype, |plan| Box::new(emulated(plan, kernel, &device)));
            assert!(
                failures.is_empty(),
                "emulated {} kernel: {}",
                kernel.name(),
                failures.join("\n")
            );
        }
        let (failures, ran) = check_fft_sizes(|plan| {
            Some(Box::new(emulated(plan, kernel, &device)) as Box<dyn MelBackend>)
        });
        assert!(
            failures.is_empty(),
            "emulated {} kernel: {}",
            kernel.name(),
            failures.join("\n")
        );
        assert_eq!(ran, [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]);
    }
}
