//! Reader throughput against the h5py DataLoader pattern, in one run:
//!
//! ```sh
//! cargo run --release -p melread --example read_bench -- --data OUT_DIR [--split training]
//! ```
//!
//! Uniformly shuffled segments, batches of 5,632 (the field report's), f16 → f32:
//! melread as ndarray batches and as candle CPU tensors, then
//! `benches/peer_h5py.py` (4 worker processes, one h5py read per segment, as a PyTorch
//! DataLoader does) on the very segments melread read. Warm page cache (the file read
//! right before each timed run), then cold (the file's pages evicted with
//! `posix_fadvise(DONTNEED)`, `/proc/sys/vm/drop_caches` if that leaves pages; residency
//! checked with `mincore`). Also measures the floors: memory copy bandwidth and f16→f32
//! conversions per second. Prints a table and, with `--json FILE`, writes every figure.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use candle_core::Device;
use clap::Parser;
use half::slice::HalfFloatSliceExt;
use melread::{Loader, LoaderOptions, Output, Shuffle, Split, TensorFloat, Unit};

#[derive(Debug, Parser)]
#[command(about = "melread's segment throughput against 4 h5py DataLoader-style workers")]
pub struct Args {
    /// A melctl output folder.
    #[arg(long)]
    data: PathBuf,
    /// The split to read.
    #[arg(long, default_value = "training")]
    split: String,
    /// Segments per batch.
    #[arg(long, default_value_t = 5632)]
    batch: usize,
    /// Batches melread reads per measurement.
    #[arg(long, default_value_t = 400)]
    batches: usize,
    /// Batches the h5py peer reads per measurement.
    #[arg(long, default_value_t = 40)]
    peer_batches: usize,
    /// Loader threads (default: all cores).
    #[arg(long)]
    workers: Option<usize>,
    /// Batches read ahead.
    #[arg(long, default_value_t = 4)]
    prefetch: usize,
    /// The peer's worker processes.
    #[arg(long, default_value_t = 4)]
    peer_workers: usize,
    /// Skip the cold-cache measurements.
    #[arg(long)]
    warm_only: bool,
    /// Write every figure here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The fraction of `path`'s pages in the page cache (mincore on a map of it).
fn resident(path: &Path) -> Result<f64> {
    let file = File::open(path)?;
    let len = file.metadata()?.len() as usize;
    if len == 0 {
        return Ok(1.0);
    }
    // SAFETY: a read-only map only passed to mincore, never read.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    let page = 4096;
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: `vec` has one byte per page of the mapped range.
    let r = unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, len, vec.as_mut_ptr()) };
    if r != 0 {
        bail!("mincore: {}", std::io::Error::last_os_error());
    }
    Ok(vec.iter().filter(|&&b| b & 1 == 1).count() as f64 / vec.len() as f64)
}

/// Reads the whole file once, so its pages are cached.
fn warm(path: &Path) -> Result<f64> {
    use std::io::Read;
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; 8 << 20];
    while f.read(&mut buf)? > 0 {}
    resident(path)
}

/// Evicts the file's pages; says how.
fn evict(path: &Path) -> Result<(String, f64)> {
    use std::os::fd::AsRawFd;
    let f = File::open(path)?;
    // SAFETY: a valid descriptor; the call only drops clean cached pages of this file.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let left = resident(path)?;
    if left < 0.01 {
        return Ok(("posix_fadvise(DONTNEED) on the file".into(), left));
    }
    let dropped = std::fs::write("/proc/sys/vm/drop_caches", "1");
    let left = resident(path)?;
    match dropped {
        Ok(()) => Ok((
            format!("posix_fadvise left {left:.2}; echo 1 > /proc/sys/vm/drop_caches"),
            left,
        )),
        Err(e) => Ok((
            format!("posix_fadvise left {left:.2}; drop_caches failed: {e}"),
            left,
        )),
    }
}

/// GB/s of a large memory copy (a floor for bytes moved per segment), on one thread.
fn copy_bandwidth() -> f64 {
    let n = 256 << 20;
    let src = vec![1u8; n];
    let mut dst = vec![0u8; n];
    dst.copy_from_slice(&src);
    let t = Instant::now();
    let rounds = 8;
    for _ in 0..rounds {
        dst.copy_from_slice(std::hint::black_box(&src));
    }
    std::hint::black_box(&dst);
    (rounds * n) as f64 / t.elapsed().as_secs_f64() / 1e9
}

/// f16 → f32 conversions per second on one thread, data in cache (half's slice
/// conversion: F16C where the CPU has it).
fn conversions_per_second() -> f64 {
    let n = 160 * 64;
    let src: Vec<half::f16> = (0..n)
        .map(|i| half::f16::from_f32(i as f32 * 0.01))
        .collect();
    let mut dst = vec![0f32; n];
    let rounds = 20_000;
    let t = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(&src[..]).convert_to_f32_slice(&mut dst);
        std::hint::black_box(&mut dst);
    }
    (rounds * n) as f64 / t.elapsed().as_secs_f64()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Consumer {
    /// f32 ndarray batches, dropped after a touch.
    Ndarray,
    /// f32 batches moved into candle CPU tensors (no copy).
    CandleMove,
    /// f16 batches as stored, converted to f32 when the tensor is made.
    CandleFromF16,
}

/// Segments per second over `batches` batches of epoch 0 (worker start-up included).
fn melread(
    loader_f32: &Loader,
    loader_f16: &Loader,
    consumer: Consumer,
    batches: usize,
) -> Result<(f64, usize)> {
    let loader = if consumer == Consumer::CandleFromF16 {
        loader_f16
    } else {
        loader_f32
    };
    let t = Instant::now();
    let mut n = 0usize;
    let mut check = 0f32;
    for b in loader.epoch(0).take(batches) {
        let b = b?;
        n += b.len();
        match consumer {
            Consumer::Ndarray => check += b.view().expect("f32")[[0, 0, 0]],
            Consumer::CandleMove => {
                let (x, _) = b.into_tensors(&Device::Cpu, TensorFloat::F32)?;
                check += x.dims()[0] as f32;
            }
            Consumer::CandleFromF16 => {
                let (x, _) = b.to_tensors(&Device::Cpu, TensorFloat::F32)?;
                check += x.dims()[0] as f32;
            }
        }
    }
    std::hint::black_box(check);
    Ok((n as f64 / t.elapsed().as_secs_f64(), n))
}

/// Runs the h5py peer on `ids`; its segments per second.
fn peer(
    script: &Path,
    file: &Path,
    ids: &Path,
    batch: usize,
    workers: usize,
) -> Result<(f64, usize)> {
    let out = Command::new("python3")
        .arg(script)
        .arg(file)
        .arg(ids)
        .args([
            "--batch",
            &batch.to_string(),
            "--workers",
            &workers.to_string(),
        ])
        .output()
        .context("running python3 (the peer needs numpy and h5py)")?;
    if !out.status.success() {
        bail!("the peer failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    Ok((
        v["segments_per_s"].as_f64().context("peer output")?,
        v["segments"].as_u64().context("peer output")? as usize,
    ))
}

/// Writes global segment ids as an int64 `.npy` vector.
fn write_ids(path: &Path, ids: &[i64]) -> Result<()> {
    let dict = format!(
        "{{'descr': '<i8', 'fortran_order': False, 'shape': ({},), }}",
        ids.len()
    );
    let mut header = dict.into_bytes();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header);
    bytes.extend(ids.iter().flat_map(|i| i.to_le_bytes()));
    std::fs::write(path, bytes)?;
    Ok(())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn main() -> Result<()> {
    run(&Args::parse())
}

/// The whole measurement, as `main` runs it with `args`.
pub fn run(args: &Args) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let workers = args.workers.unwrap_or(cores);
    let split = Arc::new(Split::open_in(&args.data, &args.split)?);
    let file = split.path().to_path_buf();
    if split.format() != melread::Format::Hdf5 {
        bail!(
            "the h5py peer needs an HDF5 split; {} is not one",
            file.display()
        );
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peer_h5py.py");
    let (loader_f32, loader_f16) = open_loaders(&split, args, workers)?;
    check_measurable(args, &split, &loader_f32)?;
    let batches = args.batches.min(loader_f32.batches_per_epoch());
    let peer_batches = args.peer_batches.min(batches);
    let ids_path = write_peer_ids(&split, &loader_f32, peer_batches)?;
    let peer = Peer {
        script: &script,
        file: &file,
        ids: &ids_path,
        batch: args.batch,
        workers: args.peer_workers,
    };

    let bytes = std::fs::metadata(&file)?.len();
    print_setup(&split, &loader_f32, args, bytes, cores, workers);
    let (bandwidth, conv) = floors(&split);

    let mut runs = Runs::default();
    let (warm_rates, peer_warm) =
        measure_warm(&mut runs, &peer, &loader_f32, &loader_f16, batches)?;
    let (clips, segments, dtype) = (split.clips(), split.segments(), split.dtype());
    let memory_bound = loader_f32.memory_bound();
    let mut cold = None;
    if !args.warm_only {
        // A mapped page cannot be evicted: everything that maps the file goes first, and
        // the cold run opens the split afresh.
        drop((loader_f32, loader_f16, split));
        cold = Some(measure_cold(&mut runs, &peer, args, workers, batches)?);
    }
    let _ = std::fs::remove_file(&ids_path);
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "file": file, "bytes": bytes, "clips": clips, "segments": segments,
            "dtype": dtype.name(), "batch": args.batch, "workers": workers,
            "prefetch": args.prefetch, "memory_bound": memory_bound,
            "cpu": cpu_model(), "cores": cores,
            "copy_gb_per_s": bandwidth, "f16_to_f32_per_s": conv,
            "runs": runs.rows,
            "warm_ratio_ndarray": warm_rates[0] / peer_warm,
            "cold_ratio": cold.map(|(r, p)| r / p),
        });
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)?;
    }
    Ok(())
}

/// The loader options every measurement reads with, batches given as `output`.
fn loader_options(args: &Args, workers: usize, output: Output) -> LoaderOptions {
    LoaderOptions {
        unit: Unit::Segment,
        batch_size: args.batch,
        shuffle: Shuffle::Uniform,
        seed: 1,
        drop_last: true,
        workers,
        prefetch: args.prefetch,
        output,
        ..LoaderOptions::default()
    }
}

/// The two loaders of `split`: f32 batches and batches as stored.
fn open_loaders(split: &Arc<Split>, args: &Args, workers: usize) -> Result<(Loader, Loader)> {
    let loader_f32 = Loader::new(split.clone(), loader_options(args, workers, Output::F32))?;
    let loader_f16 = Loader::new(split.clone(), loader_options(args, workers, Output::Stored))?;
    Ok((loader_f32, loader_f16))
}

/// Refused, like the tools refuse what they cannot do: a split smaller than one batch
/// measured nothing and printed "NaNx".
fn check_measurable(args: &Args, split: &Split, loader: &Loader) -> Result<()> {
    if args.batches == 0 || args.peer_batches == 0 {
        bail!("--batches and --peer-batches must be at least 1: nothing would be measured");
    }
    if loader.batches_per_epoch() == 0 {
        bail!(
            "{} holds {} segments, fewer than one batch of {} (--batch): nothing to measure; pass a smaller --batch",
            split.path().display(),
            split.segments(),
            args.batch
        );
    }
    Ok(())
}

/// Writes the segments of the first `peer_batches` batches melread reads, so the peer
/// reads them exactly; the file's path.
fn write_peer_ids(split: &Split, loader: &Loader, peer_batches: usize) -> Result<PathBuf> {
    let ids: Vec<i64> = loader
        .plan(0, 0)
        .take(peer_batches)
        .flatten()
        .map(|id| (id.clip * split.segments_per_clip() + id.segment) as i64)
        .collect();
    let ids_path =
        std::env::temp_dir().join(format!("melread-bench-ids-{}.npy", std::process::id()));
    write_ids(&ids_path, &ids)?;
    Ok(ids_path)
}

/// Prints what is read (the file, its segments, its size) and by whom.
fn print_setup(
    split: &Split,
    loader: &Loader,
    args: &Args,
    bytes: u64,
    cores: usize,
    workers: usize,
) {
    let seg_stored = split.values_per_segment() * split.dtype().size();
    println!(
        "{}: {} clips, {} segments of {:?} {} ({} bytes each), {:.2} GB, read by {:?}",
        split.path().display(),
        split.clips(),
        split.segments(),
        split.segment_shape(),
        split.dtype().name(),
        seg_stored,
        bytes as f64 / 1e9,
        split.access()
    );
    println!(
        "machine: {} ({cores} cores); melread: {workers} workers, prefetch {}, memory bound {:.1} MB; peer: {} processes",
        cpu_model(),
        args.prefetch,
        loader.memory_bound() as f64 / 1e6,
        args.peer_workers
    );
}

/// Measures and prints the floors for `split`'s segments: (copy GB/s, f16→f32
/// conversions per second).
fn floors(split: &Split) -> (f64, f64) {
    let seg_stored = split.values_per_segment() * split.dtype().size();
    let bandwidth = copy_bandwidth();
    let conv = conversions_per_second();
    // Per segment: stored bytes read + f32 bytes written.
    let seg_bytes = seg_stored + split.values_per_segment() * 4;
    println!(
        "floors (one core): copy {bandwidth:.1} GB/s → {:.1} M segments/s at {seg_bytes} bytes moved each; f16→f32 {:.0} M values/s → {:.1} M segments/s",
        bandwidth * 1e9 / seg_bytes as f64 / 1e6,
        conv / 1e6,
        conv / split.values_per_segment() as f64 / 1e6
    );
    (bandwidth, conv)
}

/// The measurements so far, each printed as it is recorded.
#[derive(Default)]
struct Runs {
    rows: Vec<serde_json::Value>,
}

impl Runs {
    /// Prints one measurement's line and keeps it for the JSON report.
    fn record(&mut self, cache: &str, what: &str, rate: f64, n: usize, note: &str) {
        println!(
            "{cache:<5} {what:<46} {:>12.0} segments/s  ({n} segments){note}",
            rate
        );
        self.rows.push(serde_json::json!({"cache": cache, "reader": what, "segments_per_s": rate, "segments": n, "note": note}));
    }
}

/// The h5py peer as every measurement runs it: its script, the file, the segment ids.
struct Peer<'a> {
    script: &'a Path,
    file: &'a Path,
    ids: &'a Path,
    batch: usize,
    workers: usize,
}

impl Peer<'_> {
    /// Runs the peer once; its segments per second and segments read.
    fn run(&self) -> Result<(f64, usize)> {
        peer(self.script, self.file, self.ids, self.batch, self.workers)
    }

    /// The peer's name in the table.
    fn name(&self) -> String {
        format!("h5py, {} worker processes", self.workers)
    }
}

/// Warm: the file is read right before each timed run; every melread consumer, then the
/// peer. (melread's rates per consumer, the peer's rate.)
fn measure_warm(
    runs: &mut Runs,
    peer: &Peer,
    loader_f32: &Loader,
    loader_f16: &Loader,
    batches: usize,
) -> Result<(Vec<f64>, f64)> {
    let consumers = [
        (Consumer::Ndarray, "melread → ndarray f32"),
        (Consumer::CandleMove, "melread → candle f32 tensor (moved)"),
        (
            Consumer::CandleFromF16,
            "melread f16 → candle f32 tensor (converted)",
        ),
    ];
    let mut warm_rates = Vec::new();
    for (c, name) in consumers {
        let res = warm(peer.file)?;
        let (rate, n) = melread(loader_f32, loader_f16, c, batches)?;
        runs.record(
            "warm",
            name,
            rate,
            n,
            &format!("  [resident {:.0}%]", res * 100.0),
        );
        warm_rates.push(rate);
    }
    let res = warm(peer.file)?;
    let (peer_warm, n) = peer.run()?;
    runs.record(
        "warm",
        &peer.name(),
        peer_warm,
        n,
        &format!("  [resident {:.0}%]", res * 100.0),
    );
    println!(
        "warm: melread is {:.1}x (ndarray), {:.1}x (candle) the h5py workers",
        warm_rates[0] / peer_warm,
        warm_rates[1] / peer_warm
    );
    Ok((warm_rates, peer_warm))
}

/// Cold: the file's pages evicted before melread (the split opened afresh, as nothing
/// may map it while it is evicted) and before the peer. (melread's rate, the peer's.)
fn measure_cold(
    runs: &mut Runs,
    peer: &Peer,
    args: &Args,
    workers: usize,
    batches: usize,
) -> Result<(f64, f64)> {
    let (how, left) = evict(peer.file)?;
    let split = Arc::new(Split::open_in(&args.data, &args.split)?);
    let (loader_f32, loader_f16) = open_loaders(&split, args, workers)?;
    let (rate, n) = melread(&loader_f32, &loader_f16, Consumer::Ndarray, batches)?;
    drop((loader_f32, loader_f16, split));
    runs.record(
        "cold",
        "melread → ndarray f32",
        rate,
        n,
        &format!("  [{how}; resident before {:.1}%]", left * 100.0),
    );
    let (how, left) = evict(peer.file)?;
    let (p, n) = peer.run()?;
    runs.record(
        "cold",
        &peer.name(),
        p,
        n,
        &format!("  [{how}; resident before {:.1}%]", left * 100.0),
    );
    println!("cold: melread is {:.1}x the h5py workers", rate / p);
    Ok((rate, p))
}
