//! An interrupt stops the CPU backend inside a batch: a batch on a loaded machine held the
//! stop for seconds (the interrupt test saw 5 s on a busy 2-core CI machine).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mel_core::{MelBackend, MelPlan, OutputBuf, Preset};
use mel_cpu::CpuBackend;

#[test]
fn a_raised_flag_stops_a_batch_and_says_cancelled() {
    let plan = MelPlan::from_config(&Preset::Leak4k.config()).unwrap();
    let clips = 8;
    let samples = vec![0.25f32; clips * plan.clip_samples()];
    let mut out = OutputBuf::zeros(plan.dtype(), clips * plan.values_per_clip());
    let mut backend = CpuBackend::new(plan);
    let cancel = Arc::new(AtomicBool::new(false));
    backend.watch_cancel(cancel.clone());
    backend.compute(&samples, out.as_mut_slice()).unwrap();
    cancel.store(true, Ordering::SeqCst);
    let e = backend.compute(&samples, out.as_mut_slice()).unwrap_err();
    assert!(matches!(e, mel_core::Error::Cancelled), "{e}");
}
