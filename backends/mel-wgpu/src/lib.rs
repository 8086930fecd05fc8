//! The wgpu mel backend: the fused pipeline of the CUDA backend as one WGSL compute
//! shader in f32 (`src/*.wgsl`, assembled by `codegen.rs`), for any GPU with a Vulkan,
//! Metal or DX12 driver (no 64-bit float shaders needed). One context per run (device,
//! queue, pipeline, tables, two sets of buffers and bind groups); a batch is cut into
//! chunks that alternate between the two sets, so the host copies one chunk in or out
//! while the GPU computes the other.
#![warn(missing_docs)]

pub mod adapters;
pub mod codegen;
pub mod layout;
pub mod output;
pub mod selftest;
pub mod tables;
mod timing;

use std::sync::{Arc, Mutex, mpsc};

use half::slice::HalfFloatSliceExt;
use mel_core::{DeviceTimes, MelBackend, MelPlan, OutputSlice, Result};
use wgpu::util::DeviceExt;

use adapters::err;
pub use adapters::{AdapterChoice, AdapterInfo, adapters};
pub use layout::{FftShape, Layout};
pub use output::DeviceOut;
pub use selftest::ArithmeticCheck;
pub use tables::Tables;

/// Largest workgroup grid dimension every adapter supports (`group_index` in the shader).
const MAX_GROUPS_X: usize = 65535;

/// The shader's bindings (see `common.wgsl`): storage buffers 0–5 and 7, uniform 6.
fn bind_group_layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    let entry = |binding: u32, ty| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty,
        count: None,
    };
    let storage = |read_only| wgpu::BindingType::Buffer {
        ty: wgpu::BufferBindingType::Storage { read_only },
        has_dynamic_offset: false,
        min_binding_size: None,
    };
    let uniform = wgpu::BindingType::Buffer {
        ty: wgpu::BufferBindingType::Uniform,
        has_dynamic_offset: false,
        min_binding_size: None,
    };
    let entries = [
        entry(0, storage(true)),
        entry(1, storage(false)),
        entry(2, storage(true)),
        entry(3, storage(true)),
        entry(4, storage(true)),
        entry(5, storage(true)),
        entry(6, uniform),
        entry(7, storage(false)),
    ];
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("mel"),
        entries: &entries,
    })
}

/// Outcome of mapping a buffer, sent by wgpu's callback.
type Mapping = mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>;

/// One set of chunk buffers: a chunk in flight.
struct Slot {
    /// Host-visible staging for the input, reused for every chunk (mapped, filled,
    /// unmapped, copied to `input`, then mapped again once the GPU is done with it):
    /// `queue.write_buffer` allocated fresh staging memory for every chunk instead.
    upload: wgpu::Buffer,
    /// The pending re-mapping of `upload`; `None` while it is mapped.
    upload_mapping: Option<Mapping>,
    input: wgpu::Buffer,
    output: wgpu::Buffer,
    readback: wgpu::Buffer,
    params: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    /// Mel values of segments that do not fit in workgroup memory (held by the bind group).
    _scratch: wgpu::Buffer,
    /// (first clip in the batch, clips, submission) of the chunk in flight.
    pending: Option<(usize, usize, wgpu::SubmissionIndex)>,
    /// Timestamps around the chunk's upload copy, passes and readback copy, where the
    /// device can write them inside command encoders.
    stamps: Option<Stamps>,
}

/// Four GPU timestamps per chunk: before the upload copy, before the passes, after them,
/// after the readback copy; resolved and copied to a mappable buffer.
struct Stamps {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    readback: wgpu::Buffer,
}

/// Bytes of one chunk's four resolved timestamps.
const STAMP_BYTES: u64 = 4 * 8;

/// Tuning of the wgpu backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WgpuOptions {
    /// The most invocations per workgroup (a power of two, 32 to 1024), further bounded
    /// by the adapter's limits.
    pub max_workgroup: usize,
}

impl Default for WgpuOptions {
    fn default() -> Self {
        WgpuOptions {
            max_workgroup: layout::WORKGROUP,
        }
    }
}

/// The wgpu backend.
pub struct WgpuBackend {
    plan: MelPlan,
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// The shader's passes in dispatch order, each with its workgroups per distinct segment.
    pipelines: Vec<(wgpu::ComputePipeline, usize)>,
    slots: Vec<Slot>,
    chunk_clips: usize,
    device_out: DeviceOut,
    adapter: AdapterInfo,
    shader_layout: Layout,
    /// The first error wgpu reported outside an error scope (device lost, out of memory).
    uncaptured: Arc<Mutex<Option<String>>>,
    /// Device time accumulated over `compute` calls, when timestamps are available.
    times: Option<DeviceTimes>,
    /// Nanoseconds per timestamp tick.
    tick_ns: f64,
    /// The adapter's result on the compensated-arithmetic check.
    arithmetic: ArithmeticCheck,
}

/// Workgroup size, frame pairs side by side, and where mel values live, within the
/// adapter's limits and `options`' bound.
fn choose_layout(
    plan: &MelPlan,
    info: &AdapterInfo,
    limits: &wgpu::Limits,
    options: WgpuOptions,
) -> Result<Layout> {
    let max_invocations = options
        .max_workgroup
        .min(limits.max_compute_invocations_per_workgroup as usize)
        .min(limits.max_compute_workgroup_size_x as usize);
    Layout::choose(plan, max_invocations, info.max_workgroup_storage as usize)
        .map_err(|e| err(format!("{}: {e}", info.name)))
}

/// Bytes per clip of each chunk buffer, and the clips per chunk the adapter's largest
/// storage binding allows.
struct ChunkSizes {
    /// Input samples of one clip.
    in_bytes: usize,
    /// Output values of one clip.
    out_bytes: usize,
    /// Mel scratch of one clip (0 when mel values live in workgroup memory).
    scratch_bytes: usize,
    /// Clips per chunk: the requested count, capped by the adapter's buffer limits.
    chunk_clips: usize,
}

impl ChunkSizes {
    /// The sizes for `plan`, with `chunk_clips` capped so every buffer binds; refused if
    /// not even one clip fits.
    fn fit(
        plan: &MelPlan,
        info: &AdapterInfo,
        shader_layout: &Layout,
        device_out: DeviceOut,
        chunk_clips: usize,
    ) -> Result<Self> {
        let in_bytes = plan.clip_samples() * 4;
        let out_bytes = plan.values_per_clip() * device_out.bytes();
        let scratch_bytes = if shader_layout.mel_in_workgroup {
            0
        } else {
            plan.distinct_offsets().len() * plan.values_per_segment() * 4
        };
        let per_clip = in_bytes.max(out_bytes).max(scratch_bytes);
        let max_binding = usize::try_from(info.max_storage_binding).unwrap_or(usize::MAX);
        let fit = max_binding / per_clip;
        if fit == 0 {
            return Err(err(format!(
                "one clip needs a {per_clip}-byte buffer; {} binds at most {max_binding} bytes",
                info.name
            )));
        }
        Ok(ChunkSizes {
            in_bytes,
            out_bytes,
            scratch_bytes,
            chunk_clips: chunk_clips.clamp(1, fit),
        })
    }
}

/// The first error wgpu reports outside an error scope (device lost, out of memory).
type FirstError = Arc<Mutex<Option<String>>>;

/// Opens the device with the `limits` given and whichever of `stamp_features` the adapter
/// offers; its uncaptured errors and loss go to the returned [`FirstError`].
fn open_device(
    adapter: &wgpu::Adapter,
    info: &AdapterInfo,
    limits: wgpu::Limits,
    stamp_features: wgpu::Features,
) -> Result<(wgpu::Device, wgpu::Queue, FirstError)> {
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("melctl"),
        required_features: adapter.features() & stamp_features,
        required_limits: limits,
        ..Default::default()
    }))
    .map_err(|e| err(format!("{}: could not open the device: {e}", info.name)))?;
    let uncaptured = Arc::new(Mutex::new(None));
    let sink = uncaptured.clone();
    device.on_uncaptured_error(Box::new(move |e| {
        let mut first = sink.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert_with(|| e.to_string());
    }));
    let sink = uncaptured.clone();
    device.set_device_lost_callback(move |reason, message| {
        let mut first = sink.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert_with(|| format!("device lost ({reason:?}): {message}"));
    });
    Ok((device, queue, uncaptured))
}

/// The transform's accuracy rests on error-free transformations that a compiler which
/// reassociates float arithmetic would break: checks them on this adapter.
fn check_arithmetic(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    info: &AdapterInfo,
) -> Result<ArithmeticCheck> {
    let arithmetic =
        selftest::run(device, queue).map_err(|e| err(format!("{}: {e}", info.name)))?;
    if !arithmetic.ok() {
        return Err(err(format!(
            "{}: its shader compiler does not keep compensated f32 arithmetic exact ({} of {} \
             checks wrong), so the transform would miss torchaudio's f64 reference by more \
             than 0.01 dB",
            info.name, arithmetic.shielded_wrong, arithmetic.cases
        )));
    }
    Ok(arithmetic)
}

/// Compiles the shader for `plan`: the bind group layout, and the passes' pipelines in
/// dispatch order, each with its workgroups per distinct segment.
fn compile(
    device: &wgpu::Device,
    plan: &MelPlan,
    tables: &Tables,
    shader_layout: &Layout,
) -> Result<(wgpu::BindGroupLayout, Vec<(wgpu::ComputePipeline, usize)>)> {
    device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("melctl mel shader"),
        source: wgpu::ShaderSource::Wgsl(codegen::shader(plan, tables, shader_layout).into()),
    });
    let layout = bind_group_layout(device);
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("mel"),
        bind_group_layouts: &[&layout],
        push_constant_ranges: &[],
    });
    let pipelines = layout::passes(plan)
        .into_iter()
        .map(|(entry, groups_per_segment)| {
            let p = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            });
            (p, groups_per_segment)
        })
        .collect();
    if let Some(e) = pollster::block_on(device.pop_error_scope()) {
        return Err(err(format!(
            "the shader did not compile for this plan: {e}"
        )));
    }
    Ok((layout, pipelines))
}

/// The plan's tables on the device (bindings 2 to 5), shared by both slots.
struct TableBuffers {
    window: wgpu::Buffer,
    twiddle: wgpu::Buffer,
    ints: wgpu::Buffer,
    weights: wgpu::Buffer,
}

impl TableBuffers {
    /// Uploads `tables`.
    fn upload(device: &wgpu::Device, tables: &Tables) -> Self {
        let init = |label: &str, contents: &[u8]| {
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage: wgpu::BufferUsages::STORAGE,
            })
        };
        TableBuffers {
            window: init("window", bytemuck::cast_slice(&tables.window)),
            twiddle: init("twiddle", bytemuck::cast_slice(&tables.twiddle)),
            ints: init("ints", bytemuck::cast_slice(&tables.ints)),
            weights: init("weights", bytemuck::cast_slice(&tables.weights)),
        }
    }
}

/// A buffer of `size` bytes, not mapped.
fn unmapped_buffer(
    device: &wgpu::Device,
    label: &str,
    size: usize,
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size as u64,
        usage,
        mapped_at_creation: false,
    })
}

impl Slot {
    /// One set of chunk buffers sized by `sizes`, bound with the shared `tables`; with
    /// timestamp queries when `stamped`.
    fn new(
        device: &wgpu::Device,
        layout: &wgpu::BindGroupLayout,
        tables: &TableBuffers,
        sizes: &ChunkSizes,
        stamped: bool,
    ) -> Slot {
        use wgpu::BufferUsages as U;
        let ChunkSizes {
            in_bytes,
            out_bytes,
            scratch_bytes,
            chunk_clips,
        } = *sizes;
        let buffer = |label: &str, size: usize, usage| unmapped_buffer(device, label, size, usage);
        let upload = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("upload"),
            size: (chunk_clips * in_bytes) as u64,
            usage: U::MAP_WRITE | U::COPY_SRC,
            mapped_at_creation: true,
        });
        let input = buffer("clips", chunk_clips * in_bytes, U::STORAGE | U::COPY_DST);
        let output = buffer("out", chunk_clips * out_bytes, U::STORAGE | U::COPY_SRC);
        let readback = buffer(
            "readback",
            chunk_clips * out_bytes,
            U::MAP_READ | U::COPY_DST,
        );
        let params = buffer("params", 16, U::UNIFORM | U::COPY_DST);
        let scratch = buffer("scratch", (chunk_clips * scratch_bytes).max(4), U::STORAGE);
        let entries: Vec<wgpu::BindGroupEntry> = [
            &input,
            &output,
            &tables.window,
            &tables.twiddle,
            &tables.ints,
            &tables.weights,
            &params,
            &scratch,
        ]
        .iter()
        .enumerate()
        .map(|(i, b)| wgpu::BindGroupEntry {
            binding: i as u32,
            resource: b.as_entire_binding(),
        })
        .collect();
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("mel"),
            layout,
            entries: &entries,
        });
        let stamps = stamped.then(|| Stamps {
            queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("chunk times"),
                ty: wgpu::QueryType::Timestamp,
                count: 4,
            }),
            resolved: buffer(
                "chunk times",
                STAMP_BYTES as usize,
                U::QUERY_RESOLVE | U::COPY_SRC,
            ),
            readback: buffer(
                "chunk times readback",
                STAMP_BYTES as usize,
                U::MAP_READ | U::COPY_DST,
            ),
        });
        Slot {
            upload,
            upload_mapping: None,
            input,
            output,
            readback,
            params,
            bind_group,
            _scratch: scratch,
            pending: None,
            stamps,
        }
    }
}

impl WgpuBackend {
    /// Opens the adapter `choice` names, compiles the shader for `plan` and allocates
    /// two sets of buffers for chunks of at most `chunk_clips` clips (fewer when the
    /// adapter's buffer limits are smaller).
    pub fn new(plan: MelPlan, choice: &AdapterChoice, chunk_clips: usize) -> Result<Self> {
        Self::with_options(plan, choice, chunk_clips, WgpuOptions::default())
    }

    /// Like [`new`](Self::new), with the tuning `options` give.
    pub fn with_options(
        plan: MelPlan,
        choice: &AdapterChoice,
        chunk_clips: usize,
        options: WgpuOptions,
    ) -> Result<Self> {
        if !(options.max_workgroup.is_power_of_two()
            && (32..=1024).contains(&options.max_workgroup))
        {
            return Err(err(format!(
                "a workgroup bound of {} invocations: it must be a power of two from 32 to 1024",
                options.max_workgroup
            )));
        }
        let (info, adapter) = adapters::pick(adapters::instance(), choice)?;
        let limits = adapter.limits();
        let shader_layout = choose_layout(&plan, &info, &limits, options)?;
        let device_out = DeviceOut::for_plan(&plan);
        let sizes = ChunkSizes::fit(&plan, &info, &shader_layout, device_out, chunk_clips)?;
        let chunk_clips = sizes.chunk_clips;

        // Nothing required; timestamp queries where offered (`time_kernel` uses them in
        // passes, `device_times` inside encoders around the copies too).
        let stamp_features =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
        let (device, queue, uncaptured) = open_device(&adapter, &info, limits, stamp_features)?;
        let arithmetic = check_arithmetic(&device, &queue, &info)?;
        let tables = Tables::new(&plan);
        let (layout, pipelines) = compile(&device, &plan, &tables, &shader_layout)?;
        let table_buffers = TableBuffers::upload(&device, &tables);
        let stamped = device.features().contains(stamp_features);
        device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let slots = (0..2)
            .map(|_| Slot::new(&device, &layout, &table_buffers, &sizes, stamped))
            .collect();
        if let Some(e) = pollster::block_on(device.pop_error_scope()) {
            return Err(err(format!(
                "{}: buffers for {chunk_clips} clips per chunk: {e}",
                info.name
            )));
        }
        let tick_ns = queue.get_timestamp_period() as f64;
        Ok(WgpuBackend {
            plan,
            device,
            queue,
            pipelines,
            slots,
            chunk_clips,
            device_out,
            adapter: info,
            shader_layout,
            uncaptured,
            times: stamped.then(DeviceTimes::default),
            tick_ns,
            arithmetic,
        })
    }

    /// The adapter in use.
    pub fn adapter(&self) -> &AdapterInfo {
        &self.adapter
    }

    /// What the compensated-arithmetic check found on this adapter (it passed, or the
    /// backend would not have started).
    pub fn arithmetic(&self) -> ArithmeticCheck {
        self.arithmetic
    }

    /// The shader's workgroup layout (size, frame pairs side by side, mel storage).
    pub fn layout(&self) -> &Layout {
        &self.shader_layout
    }

    /// Clips per chunk (the requested size, capped by the adapter's buffer limits).
    pub fn chunk_clips(&self) -> usize {
        self.chunk_clips
    }

    fn check_device(&self) -> Result<()> {
        let first = self.uncaptured.lock().unwrap_or_else(|p| p.into_inner());
        match first.as_ref() {
            Some(e) => Err(err(format!("{}: {e}", self.adapter.name))),
            None => Ok(()),
        }
    }

    /// Waits until slot `i`'s upload buffer is mapped again (its previous chunk is done:
    /// `drain` waited for it, so this rarely has to poll).
    fn wait_upload(&mut self, i: usize) -> Result<()> {
        let Some(rx) = self.slots[i].upload_mapping.take() else {
            return Ok(());
        };
        loop {
            match rx.try_recv() {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => {
                    // Ask again, so that no later chunk writes into an unmapped buffer.
                    self.request_upload_map(i);
                    return Err(err(format!("mapping the upload buffer: {e}")));
                }
                Err(mpsc::TryRecvError::Empty) => {
                    self.device.poll(wgpu::PollType::Wait).map_err(|e| {
                        err(format!("{}: waiting for the GPU: {e}", self.adapter.name))
                    })?;
                    self.check_device()?;
                }
                Err(mpsc::TryRecvError::Disconnected) => {
                    return Err(err("the upload buffer's mapping was dropped"));
                }
            }
        }
    }

    /// Uploads `clips` (whole clips) into slot `i` and submits the shader and the copy back.
    fn submit(&mut self, i: usize, first: usize, clips: &[f32]) -> Result<()> {
        let n = clips.len() / self.plan.clip_samples();
        let segments = n * self.plan.distinct_offsets().len();
        let in_bytes = std::mem::size_of_val(clips) as u64;
        self.wait_upload(i)?;
        let slot = &self.slots[i];
        slot.upload
            .slice(..in_bytes)
            .get_mapped_range_mut()
            .copy_from_slice(bytemuck::cast_slice(clips));
        slot.upload.unmap();
        let params = [n as u32, 0, 0, 0];
        self.queue
            .write_buffer(&slot.params, 0, bytemuck::cast_slice(&params));
        let out_bytes = (n * self.plan.values_per_clip() * self.device_out.bytes()) as u64;
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("mel") });
        let stamp = |enc: &mut wgpu::CommandEncoder, i: u32| {
            if let Some(s) = &slot.stamps {
                enc.write_timestamp(&s.queries, i);
            }
        };
        stamp(&mut enc, 0);
        enc.copy_buffer_to_buffer(&slot.upload, 0, &slot.input, 0, in_bytes);
        stamp(&mut enc, 1);
        // One compute pass per shader pass: the second reads what the first wrote.
        for (pipeline, per_segment) in &self.pipelines {
            let groups = segments * per_segment;
            let gx = groups.min(MAX_GROUPS_X);
            let gy = groups.div_ceil(gx);
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &slot.bind_group, &[]);
            pass.dispatch_workgroups(gx as u32, gy as u32, 1);
        }
        stamp(&mut enc, 2);
        enc.copy_buffer_to_buffer(&slot.output, 0, &slot.readback, 0, out_bytes);
        stamp(&mut enc, 3);
        if let Some(s) = &slot.stamps {
            enc.resolve_query_set(&s.queries, 0..4, &s.resolved, 0);
            enc.copy_buffer_to_buffer(&s.resolved, 0, &s.readback, 0, STAMP_BYTES);
        }
        let index = self.queue.submit([enc.finish()]);
        // Mapped again once this submission is done with it.
        self.request_upload_map(i);
        self.slots[i].pending = Some((first, n, index));
        Ok(())
    }

    /// Asks wgpu to map slot `i`'s upload buffer for writing once the GPU is done with it.
    fn request_upload_map(&mut self, i: usize) {
        let (tx, rx) = mpsc::channel();
        let slot = &mut self.slots[i];
        slot.upload
            .slice(..)
            .map_async(wgpu::MapMode::Write, move |r| {
                let _ = tx.send(r);
            });
        slot.upload_mapping = Some(rx);
    }

    /// Waits for slot `i`'s chunk, if any, and copies its output into `out`.
    fn drain(&mut self, i: usize, out: &mut OutputSlice<'_>) -> Result<()> {
        let Some((first, n, index)) = self.slots[i].pending.take() else {
            return Ok(());
        };
        let vpc = self.plan.values_per_clip();
        let bytes = (n * vpc * self.device_out.bytes()) as u64;
        let slice = self.slots[i].readback.slice(..bytes);
        let (tx, rx) = mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        let stamps_rx = self.slots[i].stamps.as_ref().map(|s| {
            let (tx, rx) = mpsc::channel();
            s.readback
                .slice(..)
                .map_async(wgpu::MapMode::Read, move |r| {
                    let _ = tx.send(r);
                });
            rx
        });
        self.device
            .poll(wgpu::PollType::WaitForSubmissionIndex(index))
            .map_err(|e| err(format!("{}: waiting for the GPU: {e}", self.adapter.name)))?;
        self.check_device()?;
        rx.recv()
            .map_err(|_| err("the readback was dropped"))?
            .map_err(|e| err(format!("reading results back: {e}")))?;
        if let (Some(rx), Some(s)) = (stamps_rx, self.slots[i].stamps.as_ref()) {
            rx.recv()
                .map_err(|_| err("the timestamp readback was dropped"))?
                .map_err(|e| err(format!("reading timestamps: {e}")))?;
            let t: Vec<u64> =
                bytemuck::cast_slice(&s.readback.slice(..).get_mapped_range()).to_vec();
            s.readback.unmap();
            let secs = |a: u64, b: u64| b.wrapping_sub(a) as f64 * self.tick_ns / 1e9;
            if let Some(times) = self.times.as_mut() {
                times.upload_seconds += secs(t[0], t[1]);
                times.kernel_seconds += secs(t[1], t[2]);
                times.download_seconds += secs(t[2], t[3]);
            }
        }
        {
            let data = slice.get_mapped_range();
            let range = first * vpc..(first + n) * vpc;
            match (self.device_out, out) {
                (DeviceOut::F32, OutputSlice::F32(o)) => {
                    o[range].copy_from_slice(bytemuck::cast_slice(&data))
                }
                (DeviceOut::F32, OutputSlice::F16(o)) => {
                    o[range].convert_from_f32_slice(bytemuck::cast_slice(&data))
                }
                (DeviceOut::F32, OutputSlice::Bf16(o)) => {
                    o[range].convert_from_f32_slice(bytemuck::cast_slice(&data))
                }
                (DeviceOut::F16, OutputSlice::F16(o)) => {
                    bytemuck::cast_slice_mut::<_, u8>(&mut o[range]).copy_from_slice(&data)
                }
                (DeviceOut::Bf16, OutputSlice::Bf16(o)) => {
                    bytemuck::cast_slice_mut::<_, u8>(&mut o[range]).copy_from_slice(&data)
                }
                _ => return Err(err("output dtype does not match the plan")),
            }
        }
        self.slots[i].readback.unmap();
        Ok(())
    }
}

impl Drop for WgpuBackend {
    /// Waits for work in flight and destroys the device now: a dropped wgpu device
    /// otherwise lingers until polled, and drivers limit how many a process may hold.
    fn drop(&mut self) {
        self.slots.clear();
        self.pipelines.clear();
        let _ = self.device.poll(wgpu::PollType::Wait);
        self.device.destroy();
    }
}

impl MelBackend for WgpuBackend {
    fn name(&self) -> &str {
        "wgpu"
    }

    fn plan(&self) -> &MelPlan {
        &self.plan
    }

    fn compute(&mut self, clips: &[f32], mut out: OutputSlice<'_>) -> Result<()> {
        let n = self.plan.check_batch(clips.len(), &out)?;
        let cs = self.plan.clip_samples();
        let mut first = 0;
        let mut k = 0;
        let result = (|| {
            while first < n {
                let count = self.chunk_clips.min(n - first);
                let i = k % self.slots.len();
                self.drain(i, &mut out)?; // this slot's previous chunk
                self.submit(i, first, &clips[first * cs..(first + count) * cs])?;
                first += count;
                k += 1;
            }
            // The chunks still in flight, oldest first.
            for j in 0..self.slots.len() {
                self.drain((k + j) % self.slots.len(), &mut out)?;
            }
            Ok(())
        })();
        if result.is_err() {
            // Forget chunks in flight: the next batch starts from clean slots.
            self.slots.iter_mut().for_each(|s| s.pending = None);
        }
        result
    }

    /// GPU time of the uploads, passes and readbacks of every chunk so far (timestamps
    /// written inside the command encoders); `None` where the adapter offers no
    /// `TIMESTAMP_QUERY_INSIDE_ENCODERS`.
    fn device_times(&self) -> Option<DeviceTimes> {
        self.times
    }
}
