//! The CUDA mel backend: one fused kernel compiled by NVRTC for the device on first use,
//! either the f64 one (`mel.cu`, verified on an H100, the default) or the f32 one
//! (`mel_f32.cu`, compensated double-word arithmetic) as [`CudaOptions`] say; device
//! state kept for the whole run (tables uploaded once, pinned and device buffers sized
//! once), a launch shape chosen for the device, and batches cut into chunks that
//! alternate between two streams so that the host→device copy, the kernel and the
//! device→host copy of consecutive chunks overlap. CUDA events around each copy and
//! launch give [`MelBackend::device_times`].
//!
//! Built on cudarc with dynamic loading: the crate compiles, and everything links, on
//! a machine without CUDA; [`CudaBackend::new`] then fails with a clear message.
#![warn(missing_docs)]

pub mod codegen;
pub mod driver;
pub mod emu;
pub mod kernel;
pub mod launch;
pub mod tables;
mod timing;

use std::sync::Arc;

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice,
    PushKernelArg,
};
use cudarc::nvrtc::{CompileOptions, Ptx};
use mel_core::{DeviceTimes, Error, MelBackend, MelPlan, OutputSlice, Result};
use rayon::prelude::*;

pub use driver::{DeviceInfo, add_nvrtc_dirs, devices};
pub use kernel::{CudaKernel, KERNEL_SOURCE, KERNEL_SOURCE_F32};
pub use launch::{DeviceLimits, Shape};
pub use tables::Tables;

fn err(message: impl std::fmt::Display) -> Error {
    Error::Device {
        backend: "cuda".into(),
        message: message.to_string(),
    }
}

/// Compiles `kernel` for `plan` to PTX for `arch` (e.g. `compute_90`). Needs only
/// NVRTC, no GPU: the conformance tests use it to check both sources on machines without one.
pub fn compile_ptx(plan: &MelPlan, kernel: CudaKernel, shape: Shape, arch: &str) -> Result<Ptx> {
    driver::ensure_nvrtc()?;
    let mut options = codegen::macros(plan, shape)?;
    options.push(format!("--gpu-architecture={arch}"));
    options.push("--std=c++17".into());
    let opts = CompileOptions {
        options,
        name: Some(kernel.file().into()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(kernel.source(), opts).map_err(|e| {
        err(format!(
            "NVRTC could not compile the {} kernel: {e}",
            kernel.name()
        ))
    })
}

/// ptxas's resource report for `kernel` compiled for `plan` to machine code for `sm`
/// (e.g. `sm_90`): registers per thread, spill stores and loads, stack. NVRTC only, no GPU.
pub fn ptxas_report(plan: &MelPlan, kernel: CudaKernel, shape: Shape, sm: &str) -> Result<String> {
    use cudarc::nvrtc::result as nvrtc;
    driver::ensure_nvrtc()?;
    let mut options = codegen::macros(plan, shape)?;
    options.push(format!("--gpu-architecture={sm}"));
    options.push("--std=c++17".into());
    options.push("--ptxas-options=-v".into());
    let src = std::ffi::CString::new(kernel.source()).map_err(err)?;
    let prog = nvrtc::create_program(&src, None).map_err(|e| err(format!("NVRTC: {e}")))?;
    // SAFETY: `prog` was just created and is destroyed once, below; `src` outlives it.
    let compiled = unsafe { nvrtc::compile_program(prog, &options) };
    // SAFETY: as above.
    let log = unsafe { nvrtc::get_program_log(prog) };
    // SAFETY: as above; nothing uses `prog` afterwards.
    let _ = unsafe { nvrtc::destroy_program(prog) };
    let log: Vec<u8> = log
        .map_err(|e| err(format!("NVRTC log: {e}")))?
        .into_iter()
        .map(|c| c as u8)
        .take_while(|&c| c != 0)
        .collect();
    let log = String::from_utf8_lossy(&log).into_owned();
    compiled.map_err(|e| err(format!("NVRTC could not compile for {sm}: {e}\n{log}")))?;
    Ok(log
        .lines()
        .filter(|l| l.contains("ptxas info") || l.contains("spill"))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// How [`CudaBackend::with_options`] sets the backend up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CudaOptions {
    /// Which kernel transforms; `None` (the default): the one the device likely runs
    /// fastest ([`CudaKernel::suggested`]): f64 where FP64 runs at half the FP32 rate,
    /// the compensated f32 one elsewhere. Both pass the same conformance suite.
    pub kernel: Option<CudaKernel>,
    /// The launch shape; `None`: chosen for the device ([`Shape::choose`]).
    pub shape: Option<Shape>,
}

/// The window and twiddle tables, in the kernel's precision.
enum TransformTables {
    /// f64 values (`mel.cu`).
    F64 {
        window: CudaSlice<f64>,
        twiddle: CudaSlice<f64>,
    },
    /// hi + lo f32 pairs (`mel_f32.cu`: float2 window, float4 twiddles).
    F32 {
        window: CudaSlice<f32>,
        twiddle: CudaSlice<f32>,
    },
}

/// The device tables, uploaded once.
struct DeviceTables {
    transform: TransformTables,
    offsets: CudaSlice<i32>,
    map_start: CudaSlice<i32>,
    map_out: CudaSlice<i32>,
    f_start: CudaSlice<i32>,
    f_len: CudaSlice<i32>,
    f_off: CudaSlice<i32>,
    f_w: CudaSlice<f32>,
}

/// One stream's buffers: a chunk in flight.
struct Slot {
    stream: Arc<CudaStream>,
    host_in: PinnedHostSlice<f32>,
    dev_in: CudaSlice<f32>,
    dev_out: CudaSlice<u8>,
    host_out: PinnedHostSlice<u8>,
    /// (first clip of the batch, clips) of the chunk whose output is in flight.
    pending: Option<(usize, usize)>,
    /// Events recorded before the upload, before the kernel, after it and after the
    /// download of the chunk in flight.
    events: [CudaEvent; 4],
}

/// The compiled kernel with its tables and launch shape.
struct Kernel {
    kind: CudaKernel,
    func: CudaFunction,
    shape: Shape,
    shared_bytes: u32,
    tables: DeviceTables,
    segs_per_clip: i32,
    distinct: usize,
}

impl Kernel {
    /// Launches the kernel over `clips` clips of `input` into `output` on `stream`.
    fn launch(
        &self,
        stream: &Arc<CudaStream>,
        input: &CudaSlice<f32>,
        clips: usize,
        output: &mut CudaSlice<u8>,
    ) -> Result<()> {
        let segs = clips * self.distinct;
        let blocks = segs.div_ceil(self.shape.segs);
        if blocks > i32::MAX as usize {
            return Err(err("batch too large for one launch"));
        }
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: ((self.shape.warps * 32) as u32, 1, 1),
            shared_mem_bytes: self.shared_bytes,
        };
        let n = clips as i32;
        let t = &self.tables;
        let mut b = stream.launch_builder(&self.func);
        b.arg(input).arg(&n).arg(output);
        match &t.transform {
            TransformTables::F64 { window, twiddle } => b.arg(window).arg(twiddle),
            TransformTables::F32 { window, twiddle } => b.arg(window).arg(twiddle),
        };
        b.arg(&t.offsets)
            .arg(&t.map_start)
            .arg(&t.map_out)
            .arg(&self.segs_per_clip)
            .arg(&t.f_start)
            .arg(&t.f_len)
            .arg(&t.f_off)
            .arg(&t.f_w);
        // SAFETY: argument types and order match `mel_kernel` / `mel_kernel_f32` (window
        // and twiddle as the kernel's precision wants them); buffers hold `clips` clips.
        unsafe { b.launch(cfg) }.map_err(|e| err(format!("kernel launch: {e}")))?;
        Ok(())
    }
}

/// The CUDA backend.
pub struct CudaBackend {
    plan: MelPlan,
    ctx: Arc<CudaContext>,
    kernel: Kernel,
    slots: Vec<Slot>,
    chunk_clips: usize,
    device_name: String,
    limits: DeviceLimits,
    times: DeviceTimes,
}

impl CudaBackend {
    /// Opens device `ordinal`, compiles the default (verified f64) kernel for it with a
    /// launch shape chosen for the device, and uploads the tables. `chunk_clips` is the
    /// most clips per kernel launch (buffers are sized for it).
    pub fn new(plan: MelPlan, ordinal: usize, chunk_clips: usize) -> Result<Self> {
        Self::with_options(plan, ordinal, chunk_clips, CudaOptions::default())
    }

    /// Like [`new`](Self::new), with the kernel and launch shape `options` name.
    pub fn with_options(
        plan: MelPlan,
        ordinal: usize,
        chunk_clips: usize,
        options: CudaOptions,
    ) -> Result<Self> {
        driver::ensure_driver()?;
        let count = CudaContext::device_count()
            .map_err(|e| err(format!("the CUDA driver did not start: {e}")))?;
        if count <= 0 {
            return Err(err("the CUDA driver found no device"));
        }
        if ordinal >= count as usize {
            let have = match count {
                1 => "there is one CUDA device, device 0".to_string(),
                n => format!("there are {n} CUDA devices, 0 to {}", n - 1),
            };
            return Err(err(format!("no CUDA device {ordinal}: {have}")));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| err(format!("device {ordinal}: {e}")))?;
        let device_name = ctx.name().unwrap_or_else(|_| "unknown".into());
        let limits = device_limits(&ctx)?;
        let chunk_clips = chunk_clips.max(1);
        let kind = options
            .kernel
            .unwrap_or_else(|| CudaKernel::suggested(&limits));
        let shape = match options.shape {
            Some(s) => s,
            None => Shape::choose(&plan, kind, &limits, chunk_clips)?,
        };
        let shared = shape.shared_bytes(&plan);
        if shared > limits.shared_per_block {
            return Err(err(format!(
                "the kernel needs {shared} bytes of shared memory per block; {device_name} allows {}",
                limits.shared_per_block
            )));
        }
        let (major, minor) = limits.compute_capability;
        let ptx = compile_ptx(&plan, kind, shape, &format!("compute_{major}{minor}"))?;
        let module = ctx
            .load_module(ptx)
            .map_err(|e| err(format!("loading the kernel: {e}")))?;
        let func = module.load_function(kind.entry()).map_err(err)?;
        func.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            shared as i32,
        )
        .map_err(err)?;
        let t = Tables::new(&plan);
        let s = ctx.default_stream();
        let up_f = |v: &Vec<f64>| s.clone_htod(v).map_err(err);
        let up_i = |v: &Vec<i32>| s.clone_htod(v).map_err(err);
        let transform = match kind {
            CudaKernel::F64 => TransformTables::F64 {
                window: up_f(&t.window)?,
                twiddle: up_f(&t.twiddle)?,
            },
            CudaKernel::F32 => TransformTables::F32 {
                window: s.clone_htod(t.window_dw.as_flattened()).map_err(err)?,
                twiddle: s.clone_htod(t.twiddle_dw.as_flattened()).map_err(err)?,
            },
        };
        let tables = DeviceTables {
            transform,
            offsets: up_i(&t.offsets)?,
            map_start: up_i(&t.map_start)?,
            map_out: up_i(&t.map_out)?,
            f_start: up_i(&t.f_start)?,
            f_len: up_i(&t.f_len)?,
            f_off: up_i(&t.f_off)?,
            f_w: s.clone_htod(&t.f_w).map_err(err)?,
        };
        let in_len = chunk_clips * plan.clip_samples();
        let out_len = chunk_clips * plan.bytes_per_clip();
        let mut slots = Vec::new();
        for _ in 0..2 {
            let stream = ctx.new_stream().map_err(err)?;
            // SAFETY: pinned buffers are fully written before each copy reads them.
            let host_in = unsafe { ctx.alloc_pinned::<f32>(in_len) }.map_err(err)?;
            // Not write-combined: the host reads this one.
            // SAFETY: the kernel's output is copied into the whole buffer before the host
            // reads it.
            let host_out = unsafe { ctx.alloc_pinned_with_flags::<u8>(out_len, 0) }.map_err(err)?;
            let dev_in = stream.alloc_zeros::<f32>(in_len).map_err(err)?;
            let dev_out = stream.alloc_zeros::<u8>(out_len).map_err(err)?;
            let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
            let event = || ctx.new_event(timing).map_err(err);
            let events = [event()?, event()?, event()?, event()?];
            slots.push(Slot {
                stream,
                host_in,
                dev_in,
                dev_out,
                host_out,
                pending: None,
                events,
            });
        }
        s.synchronize().map_err(err)?;
        let segs_per_clip = plan.segment_map().len() as i32;
        let kernel = Kernel {
            kind,
            func,
            shape,
            shared_bytes: shared as u32,
            tables,
            segs_per_clip,
            distinct: plan.distinct_offsets().len(),
        };
        Ok(CudaBackend {
            plan,
            ctx,
            kernel,
            slots,
            chunk_clips,
            device_name,
            limits,
            times: DeviceTimes::default(),
        })
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// The launch shape in use (chosen for the device unless the options named one).
    pub fn shape(&self) -> Shape {
        self.kernel.shape
    }

    /// The kernel in use.
    pub fn kernel(&self) -> CudaKernel {
        self.kernel.kind
    }

    /// The device's attributes the launch shape was chosen from.
    pub fn limits(&self) -> DeviceLimits {
        self.limits
    }

    /// Registers per thread of the compiled kernel (from the driver).
    pub fn registers(&self) -> Result<usize> {
        self.kernel
            .func
            .num_regs()
            .map(|r| r.max(0) as usize)
            .map_err(err)
    }

    /// Copies a finished chunk's output from slot `i` into `out`, and adds its copy and
    /// kernel times (from the slot's events) to the backend's device times.
    fn drain(&mut self, i: usize, out: &mut [u8]) -> Result<()> {
        let bpc = self.plan.bytes_per_clip();
        let slot = &mut self.slots[i];
        if let Some((first, clips)) = slot.pending.take() {
            slot.stream.synchronize().map_err(err)?;
            let [e0, e1, e2, e3] = &slot.events;
            let secs = |a: &CudaEvent, b: &CudaEvent| {
                a.elapsed_ms(b).map(|ms| ms as f64 / 1e3).map_err(err)
            };
            self.times.upload_seconds += secs(e0, e1)?;
            self.times.kernel_seconds += secs(e1, e2)?;
            self.times.download_seconds += secs(e2, e3)?;
            let src = slot.host_out.as_slice().map_err(err)?;
            parallel_copy(
                &src[..clips * bpc],
                &mut out[first * bpc..(first + clips) * bpc],
            );
        }
        Ok(())
    }
}

/// Copies large buffers on the caller's rayon pool (pinned staging is on the critical path).
fn parallel_copy<T: Copy + Send + Sync>(src: &[T], dst: &mut [T]) {
    const PIECE: usize = 1 << 20;
    if std::mem::size_of_val(src) < 4 * PIECE {
        dst.copy_from_slice(src);
        return;
    }
    let per = PIECE / std::mem::size_of::<T>();
    let mut copy = move || {
        dst.par_chunks_mut(per)
            .zip(src.par_chunks(per))
            .for_each(|(d, s)| d.copy_from_slice(s))
    };
    // The caller's rayon pool: the application sizes it (melctl: --threads).
    copy();
}

impl MelBackend for CudaBackend {
    fn name(&self) -> &str {
        "cuda"
    }

    fn plan(&self) -> &MelPlan {
        &self.plan
    }

    fn compute(&mut self, clips: &[f32], out: OutputSlice<'_>) -> Result<()> {
        let cs = self.plan.clip_samples();
        let n = self.plan.check_batch(clips.len(), &out)?;
        let out: &mut [u8] = match out {
            OutputSlice::F32(o) => bytes_of_mut(o),
            OutputSlice::F16(o) => bytes_of_mut(o),
            OutputSlice::Bf16(o) => bytes_of_mut(o),
        };
        let mut first = 0;
        let mut k = 0;
        while first < n {
            let count = self.chunk_clips.min(n - first);
            let i = k % self.slots.len();
            self.drain(i, out)?; // this slot's previous chunk, if any
            let slot = &mut self.slots[i];
            let staging = slot.host_in.as_mut_slice().map_err(err)?;
            parallel_copy(
                &clips[first * cs..(first + count) * cs],
                &mut staging[..count * cs],
            );
            let [e0, e1, e2, e3] = &slot.events;
            e0.record(&slot.stream).map_err(err)?;
            slot.stream
                .memcpy_htod(&slot.host_in, &mut slot.dev_in)
                .map_err(err)?;
            e1.record(&slot.stream).map_err(err)?;
            self.kernel
                .launch(&slot.stream, &slot.dev_in, count, &mut slot.dev_out)?;
            e2.record(&slot.stream).map_err(err)?;
            let view = slot.dev_out.slice(0..count * self.plan.bytes_per_clip());
            slot.stream
                .memcpy_dtoh(&view, &mut slot.host_out)
                .map_err(err)?;
            e3.record(&slot.stream).map_err(err)?;
            slot.pending = Some((first, count));
            first += count;
            k += 1;
        }
        for i in 0..self.slots.len() {
            self.drain(i, out)?;
        }
        Ok(())
    }

    /// Seconds the device spent on host→device copies, kernels and device→host copies,
    /// summed over every chunk so far (CUDA events on each chunk's stream; the two
    /// streams overlap, so the three can add up to more than the wall time).
    fn device_times(&self) -> Option<DeviceTimes> {
        Some(self.times)
    }
}

/// The device attributes [`Shape::choose`] uses.
fn device_limits(ctx: &Arc<CudaContext>) -> Result<DeviceLimits> {
    use CUdevice_attribute as A;
    let get = |a| ctx.attribute(a).map(|v| v.max(0) as usize).map_err(err);
    Ok(DeviceLimits {
        compute_capability: ctx.compute_capability().map_err(err)?,
        sm_count: get(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        shared_per_block: get(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        shared_per_sm: get(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
        threads_per_sm: get(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        blocks_per_sm: get(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
        registers_per_sm: get(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
    })
}

fn bytes_of_mut<T: Copy>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: f32, f16 and bf16 are plain old data; any byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}
