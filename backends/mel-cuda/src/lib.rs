//! The CUDA mel backend: one fused kernel (see `mel.cu`) compiled by NVRTC for the
//! device on first use, device state kept for the whole run (tables uploaded once,
//! pinned and device buffers sized once), and batches cut into chunks that alternate
//! between two streams so that the host→device copy, the kernel and the device→host
//! copy of consecutive chunks overlap.
//!
//! Built on cudarc with dynamic loading: the crate compiles, and everything links, on
//! a machine without CUDA; [`CudaBackend::new`] then fails with a clear message.
#![warn(missing_docs)]

pub mod driver;
pub mod source;

use std::sync::Arc;

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use cudarc::nvrtc::{CompileOptions, Ptx};
use mel_core::{Error, MelBackend, MelPlan, OutputSlice, Result};
use rayon::prelude::*;

pub use driver::{DeviceInfo, devices};
pub use source::{KERNEL_SOURCE, Shape, Tables};

fn err(message: impl std::fmt::Display) -> Error {
    Error::Device {
        backend: "cuda".into(),
        message: message.to_string(),
    }
}

/// Compiles the kernel for `plan` to PTX for `arch` (e.g. `compute_90`). Needs only
/// NVRTC, no GPU: the conformance tests use it to check the source on machines without one.
pub fn compile_ptx(plan: &MelPlan, shape: Shape, arch: &str) -> Result<Ptx> {
    driver::ensure_nvrtc()?;
    let mut options = source::macros(plan, shape)?;
    options.push(format!("--gpu-architecture={arch}"));
    options.push("--std=c++17".into());
    let opts = CompileOptions {
        options,
        name: Some("mel.cu".into()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(source::KERNEL_SOURCE, opts)
        .map_err(|e| err(format!("NVRTC could not compile the kernel: {e}")))
}

/// The device tables, uploaded once.
struct DeviceTables {
    window: CudaSlice<f64>,
    twiddle: CudaSlice<f64>,
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
}

/// The compiled kernel with its tables and launch shape.
struct Kernel {
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
        b.arg(input)
            .arg(&n)
            .arg(output)
            .arg(&t.window)
            .arg(&t.twiddle)
            .arg(&t.offsets)
            .arg(&t.map_start)
            .arg(&t.map_out)
            .arg(&self.segs_per_clip)
            .arg(&t.f_start)
            .arg(&t.f_len)
            .arg(&t.f_off)
            .arg(&t.f_w);
        // SAFETY: argument types and order match `mel_kernel`; buffers hold `clips` clips.
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
}

impl CudaBackend {
    /// Opens device `ordinal`, compiles the kernel for it and uploads the tables.
    /// `chunk_clips` is the most clips per kernel launch (buffers are sized for it).
    /// `MELCTL_CUDA_SHAPE=WARPS,SEGS[,MIN_BLOCKS]` overrides the launch shape (for tuning).
    pub fn new(plan: MelPlan, ordinal: usize, chunk_clips: usize) -> Result<Self> {
        let shape = match std::env::var("MELCTL_CUDA_SHAPE") {
            Ok(s) => {
                let v: Vec<usize> = s.split(',').filter_map(|x| x.trim().parse().ok()).collect();
                match v.as_slice() {
                    [w, g, rest @ ..] if *w > 0 && *g > 0 && rest.len() <= 1 => Some(Shape {
                        warps: *w,
                        segs: *g,
                        min_blocks: rest.first().copied().unwrap_or(0),
                    }),
                    _ => {
                        return Err(err(format!(
                            "MELCTL_CUDA_SHAPE={s:?}: expected WARPS,SEGS[,MIN_BLOCKS]"
                        )));
                    }
                }
            }
            Err(_) => None,
        };
        Self::with_shape(plan, ordinal, chunk_clips, shape)
    }

    /// Like [`new`](Self::new) with an explicit launch shape (`None`: chosen for the device).
    pub fn with_shape(
        plan: MelPlan,
        ordinal: usize,
        chunk_clips: usize,
        shape: Option<Shape>,
    ) -> Result<Self> {
        driver::ensure_driver()?;
        let count = CudaContext::device_count()
            .map_err(|e| err(format!("the CUDA driver did not start: {e}")))?;
        if count <= 0 {
            return Err(err("the CUDA driver found no device"));
        }
        if ordinal >= count as usize {
            return Err(err(format!(
                "--device {ordinal}: there are only {count} CUDA devices (0..{})",
                count - 1
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| err(format!("device {ordinal}: {e}")))?;
        let device_name = ctx.name().unwrap_or_else(|_| "unknown".into());
        let (major, minor) = ctx.compute_capability().map_err(err)?;
        let max_shared = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(err)? as usize;
        let shape = match shape {
            Some(s) => s,
            None => Shape::choose(&plan, max_shared)?,
        };
        let shared = shape.shared_bytes(&plan);
        if shared > max_shared {
            return Err(err(format!(
                "the kernel needs {shared} bytes of shared memory per block; {device_name} allows {max_shared}"
            )));
        }
        let ptx = compile_ptx(&plan, shape, &format!("compute_{major}{minor}"))?;
        let module = ctx
            .load_module(ptx)
            .map_err(|e| err(format!("loading the kernel: {e}")))?;
        let func = module.load_function(source::KERNEL_NAME).map_err(err)?;
        func.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            shared as i32,
        )
        .map_err(err)?;
        let t = Tables::new(&plan);
        let s = ctx.default_stream();
        let up_f = |v: &Vec<f64>| s.clone_htod(v).map_err(err);
        let up_i = |v: &Vec<i32>| s.clone_htod(v).map_err(err);
        let tables = DeviceTables {
            window: up_f(&t.window)?,
            twiddle: up_f(&t.twiddle)?,
            offsets: up_i(&t.offsets)?,
            map_start: up_i(&t.map_start)?,
            map_out: up_i(&t.map_out)?,
            f_start: up_i(&t.f_start)?,
            f_len: up_i(&t.f_len)?,
            f_off: up_i(&t.f_off)?,
            f_w: s.clone_htod(&t.f_w).map_err(err)?,
        };
        let chunk_clips = chunk_clips.max(1);
        let in_len = chunk_clips * plan.clip_samples();
        let out_len = chunk_clips * plan.bytes_per_clip();
        let mut slots = Vec::new();
        for _ in 0..2 {
            let stream = ctx.new_stream().map_err(err)?;
            // SAFETY: pinned buffers are fully written before each copy reads them.
            let host_in = unsafe { ctx.alloc_pinned::<f32>(in_len) }.map_err(err)?;
            // Not write-combined: the host reads this one.
            let host_out = unsafe { ctx.alloc_pinned_with_flags::<u8>(out_len, 0) }.map_err(err)?;
            let dev_in = stream.alloc_zeros::<f32>(in_len).map_err(err)?;
            let dev_out = stream.alloc_zeros::<u8>(out_len).map_err(err)?;
            slots.push(Slot {
                stream,
                host_in,
                dev_in,
                dev_out,
                host_out,
                pending: None,
            });
        }
        s.synchronize().map_err(err)?;
        let segs_per_clip = plan.segment_map().len() as i32;
        let kernel = Kernel {
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
        })
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// The launch shape in use.
    pub fn shape(&self) -> Shape {
        self.kernel.shape
    }

    /// Copies a finished chunk's output from slot `i` into `out`.
    fn drain(&mut self, i: usize, out: &mut [u8]) -> Result<()> {
        let bpc = self.plan.bytes_per_clip();
        let slot = &mut self.slots[i];
        if let Some((first, clips)) = slot.pending.take() {
            slot.stream.synchronize().map_err(err)?;
            let src = slot.host_out.as_slice().map_err(err)?;
            parallel_copy(
                &src[..clips * bpc],
                &mut out[first * bpc..(first + clips) * bpc],
            );
        }
        Ok(())
    }

    /// Times the kernel alone on `clips` resident clips: `reps` launches, each timed with
    /// device events. Returns milliseconds per launch.
    pub fn time_kernel(&mut self, clips: usize, reps: usize) -> Result<Vec<f32>> {
        let stream = self.ctx.new_stream().map_err(err)?;
        let n = clips * self.plan.clip_samples();
        let host: Vec<f32> = (0..n)
            .map(|i| (((i as u64).wrapping_mul(2654435761) >> 7) % 65536) as f32 / 32768.0 - 1.0)
            .collect();
        let input = stream.clone_htod(&host).map_err(err)?;
        let mut output = stream
            .alloc_zeros::<u8>(clips * self.plan.bytes_per_clip())
            .map_err(err)?;
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps.max(1) + 2 {
            let a = self.ctx.new_event(flags).map_err(err)?;
            let b = self.ctx.new_event(flags).map_err(err)?;
            a.record(&stream).map_err(err)?;
            self.kernel.launch(&stream, &input, clips, &mut output)?;
            b.record(&stream).map_err(err)?;
            b.synchronize().map_err(err)?;
            times.push(a.elapsed_ms(&b).map_err(err)?);
        }
        times.drain(..2); // warm-up
        Ok(times)
    }
}

/// Copies with all cores for large buffers (pinned staging is on the critical path).
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
    match copy_pool() {
        Some(pool) => pool.install(copy),
        None => copy(),
    }
}

/// Threads of the backend's own for staging copies, so they never queue behind the
/// loaders' or the sink's work on the shared pool.
fn copy_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(6)
            .thread_name(|i| format!("melctl-cuda-copy-{i}"))
            .build()
            .ok()
    })
    .as_ref()
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
            slot.stream
                .memcpy_htod(&slot.host_in, &mut slot.dev_in)
                .map_err(err)?;
            self.kernel
                .launch(&slot.stream, &slot.dev_in, count, &mut slot.dev_out)?;
            let view = slot.dev_out.slice(0..count * self.plan.bytes_per_clip());
            slot.stream
                .memcpy_dtoh(&view, &mut slot.host_out)
                .map_err(err)?;
            slot.pending = Some((first, count));
            first += count;
            k += 1;
        }
        for i in 0..self.slots.len() {
            self.drain(i, out)?;
        }
        Ok(())
    }
}

fn bytes_of_mut<T: Copy>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: f32, f16 and bf16 are plain old data; any byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}
