//! `cargo xtask bench`: the configuration matrix (loaders × backends × dtypes × sinks)
//! against the plain Python peer (soundfile + librosa + h5py), on generated leak-4k
//! datasets of the given sizes, in one run. Prints a table (wall time, clips/s, ratio
//! to the peer, peak RSS), writes `target/bench/bench.json` and a PNG chart.
//!
//! `cargo xtask bench [--clips 5000,20000] [--quick]`
//! `cargo xtask bench --headline [--clips 3000] [--rounds 5]`: the default build,
//! `--precision fast` and a compressed build against the peer and against the disk's
//! floor (each build's bytes written and flushed), in back-to-back rounds, with the medians.
//! `--quick`: f16 only, no peer. Sinks: hdf5 (contiguous), hdf5-gzip (chunks of 16 clips, shuffle + deflate 1) and npy. Datasets are kept under `target/bench-data/` and reused.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::{cargo, root};

/// One measured configuration.
#[derive(Debug, Clone)]
struct Row {
    clips: usize,
    name: String,
    wall_s: f64,
    /// The whole process, start to exit (melctl: scan and device discovery included).
    process_s: f64,
    peak_rss_mb: Option<f64>,
    note: String,
    /// Sizes of the files the run wrote (melctl: its outputs).
    out_bytes: Vec<u64>,
}

impl Row {
    fn clips_per_s(&self) -> f64 {
        self.clips as f64 / self.wall_s.max(1e-9)
    }
}

/// `cargo xtask bench` options.
#[derive(clap::Args)]
pub struct Args {
    /// Dataset sizes to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [5000usize, 20000])]
    clips: Vec<usize>,
    /// f16 only (skip the f32 rows).
    #[arg(long)]
    quick: bool,
    /// Only the headline: `melctl build` (defaults, `--precision fast`, compressed)
    /// against the peer and the disk's floor, in rounds run
    /// back to back, `--rounds` times per size; prints each round and the medians.
    #[arg(long)]
    headline: bool,
    /// Rounds per size for `--headline`.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
}

/// The backends to bench: the CPU, and each GPU backend `melctl devices --json` says
/// automatic choice would use (a software wgpu adapter such as lavapipe is left out).
fn gpu_backends(melctl: &Path) -> Result<Vec<&'static str>> {
    let out = Command::new(melctl).args(["devices", "--json"]).output()?;
    if !out.status.success() {
        bail!(
            "melctl devices --json failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let d: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut backends = vec!["cpu"];
    if d["cuda"]["devices"]
        .as_array()
        .is_some_and(|v| !v.is_empty())
    {
        backends.push("cuda");
    }
    let adapters = d["wgpu"]["adapters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if adapters.iter().any(|a| a["auto_candidate"] == true) {
        backends.push("wgpu");
    }
    Ok(backends)
}

/// Runs the bench (see the module documentation).
pub fn run(args: &Args) -> Result<()> {
    let (sizes, quick) = (args.clips.clone(), args.quick);
    cargo(&["build", "--release", "-p", "melctl"])?;
    let melctl = root().join("target/release/melctl");
    let out = root().join("target/bench");
    std::fs::create_dir_all(&out)?;
    if args.headline {
        return headline(&melctl, &out, &sizes, args.rounds.max(1));
    }
    let backends = gpu_backends(&melctl)?;
    let dtypes: &[&str] = if quick { &["f16"] } else { &["f16", "f32"] };
    let machine = machine();
    println!("machine: {machine}; backends: {}", backends.join(", "));
    let mut rows = Vec::new();
    for &n in &sizes {
        let data = dataset(&melctl, n)?;
        for backend in &backends {
            for dtype in dtypes {
                // hdf5-gzip: chunks of 16 clips, shuffle + deflate 1 on all cores.
                for sink in ["hdf5", "hdf5-gzip", "npy"] {
                    let cache = out.join(format!("cache-{n}-{backend}-{dtype}"));
                    let _ = std::fs::remove_dir_all(&cache);
                    for (loader, tag) in [
                        ("preload", "preload"),
                        ("stream", "stream"),
                        ("memmap", "memmap (first run: builds the cache)"),
                        ("memmap", "memmap (second run: cache hit)"),
                    ] {
                        let name = format!("{backend} {dtype} {tag} → {sink}");
                        let row = run_melctl(
                            &melctl,
                            &data,
                            &out,
                            &cache,
                            n,
                            ([backend, dtype, loader, sink], &[]),
                            &name,
                        )?;
                        println!(
                            "{n:>6} clips  {:<52} {:>7.2} s {:>8.0} clips/s  peak {}",
                            row.name,
                            row.wall_s,
                            row.clips_per_s(),
                            rss(row.peak_rss_mb)
                        );
                        rows.push(row);
                    }
                }
            }
        }
        if !quick {
            let row = run_peer(&data, &out, n)?;
            println!(
                "{n:>6} clips  {:<52} {:>7.2} s {:>8.0} clips/s  peak {}",
                row.name,
                row.wall_s,
                row.clips_per_s(),
                rss(row.peak_rss_mb)
            );
            rows.push(row);
        }
    }
    println!("\n{}", table(&rows));
    let report = json!({
        "machine": machine,
        "date": chrono_like_now(),
        "rows": rows.iter().map(|r| json!({
            "clips": r.clips, "configuration": r.name, "wall_seconds": r.wall_s,
            "clips_per_second": r.clips_per_s(), "peak_rss_mb": r.peak_rss_mb, "note": r.note,
            "ratio_to_peer": peer_of(&rows, r.clips).map(|p| r.clips_per_s() / p.clips_per_s()),
        })).collect::<Vec<_>>(),
    });
    std::fs::write(
        out.join("bench.json"),
        serde_json::to_string_pretty(&report)? + "\n",
    )?;
    let png = out.join("bench.png");
    chart(&rows, &machine, &png)?;
    println!(
        "wrote {} and {}",
        out.join("bench.json").display(),
        png.display()
    );
    Ok(())
}

/// The builds `--headline` times, each against the peer and the disk's floor:
/// (name, `[backend, dtype, loader, sink]`, extra flags).
const HEADLINE: [(&str, [&str; 4], &[&str]); 3] = [
    ("defaults", ["auto", "f16", "auto", "hdf5"], &[]),
    (
        "--precision fast",
        ["auto", "f16", "auto", "hdf5"],
        &["--precision", "fast"],
    ),
    (
        "chunks of 16, shuffle + deflate 1",
        ["auto", "f16", "auto", "hdf5-gzip"],
        &[],
    ),
];

/// The default build (and `--precision fast`, and a compressed build) against the peer
/// and against the disk's floor, in back-to-back rounds (a shared machine's drift then
/// hits every row of a round alike); the median ratio is the figure to quote. melctl is
/// timed as a whole process (start to exit: scan, device discovery, every split); the
/// peer by its own clock, which starts after Python's imports and includes listing its
/// files. The comparison is therefore conservative for melctl. Each build's floor is
/// the time to write its own output's bytes to the same disk with the same flushing
/// ([`disk_floor`]); the peer does not flush, so it has none.
fn headline(melctl: &Path, out: &Path, sizes: &[usize], rounds: usize) -> Result<()> {
    println!("machine: {}; date: {}", machine(), chrono_like_now());
    println!(
        "| clips | round | build | whole process s | clips/s | × peer | × disk floor | output MB |\n|---:|---:|---|---:|---:|---:|---:|---:|"
    );
    for &n in sizes {
        let data = dataset(melctl, n)?;
        let cache = out.join("cache-headline");
        // Not counted: the peer's first run in a while pays librosa's imports and caches.
        run_peer(&data, out, n)?;
        let mut ratios = vec![Vec::new(); HEADLINE.len()];
        let mut floors = vec![Vec::new(); HEADLINE.len()];
        for round in 1..=rounds {
            let peer = run_peer(&data, out, n)?;
            let mut previous: Vec<u64> = peer.out_bytes.clone();
            for (i, (name, spec, extra)) in HEADLINE.into_iter().enumerate() {
                // The floor right before the build, on the disk in the same state: the
                // previous run's output removed first, as `run_melctl` does, so both
                // write into the blocks it freed; measured with the previous run's byte
                // count and scaled to this build's where they differ (compressed).
                let _ = std::fs::remove_dir_all(out.join("h5"));
                let floor = disk_floor(&out.join("floor"), &previous)?;
                let r = run_melctl(melctl, &data, out, &cache, n, (spec, extra), name)?;
                let floor = if r.out_bytes.iter().sum::<u64>() == previous.iter().sum::<u64>() {
                    floor
                } else {
                    // Another size than measured: the floor scaled to this build's bytes.
                    floor * r.out_bytes.iter().sum::<u64>() as f64
                        / previous.iter().sum::<u64>() as f64
                };
                previous = r.out_bytes.clone();
                let rate = n as f64 / r.process_s.max(1e-9);
                let ratio = rate / peer.clips_per_s();
                let to_floor = r.process_s / floor;
                ratios[i].push(ratio);
                floors[i].push(to_floor);
                println!(
                    "| {n} | {round} | {} | {:.2} | {rate:.0} | {ratio:.1}× | {to_floor:.2}× (floor {floor:.2} s) | {:.0} |",
                    r.name,
                    r.process_s,
                    r.out_bytes.iter().sum::<u64>() as f64 / 1e6
                );
            }
            println!(
                "| {n} | {round} | peer (h5py: no fsync, so no floor) | {:.2} | {:.0} | 1.0× | – | {:.0} |",
                peer.wall_s,
                peer.clips_per_s(),
                peer.out_bytes.iter().sum::<u64>() as f64 / 1e6
            );
        }
        for (i, (name, ..)) in HEADLINE.iter().enumerate() {
            let (r, f) = (median(&mut ratios[i]), median(&mut floors[i]));
            println!(
                "{n} clips, {name}: median {:.1}× the peer (range {:.1}–{:.1}×), {:.2}× the disk floor, over {rounds} rounds",
                r.0, r.1, r.2, f.0
            );
        }
    }
    Ok(())
}

/// (median, min, max) of `v`.
fn median(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// The disk's floor for a build's output: `sizes` bytes written to as many new files
/// under `dir` in 8 MiB writes, each file flushed to the disk (`fsync`) when written and
/// the folder after them, as the sinks do at the least (they also start writeback as
/// each batch lands). Returns the seconds taken; the files are removed after.
fn disk_floor(dir: &Path, sizes: &[u64]) -> Result<f64> {
    use std::io::Write;
    if sizes.iter().sum::<u64>() == 0 {
        bail!("the build wrote nothing to measure a floor for");
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    // Bytes that no layer below could compress or skip.
    let mut block = vec![0u8; 8 << 20];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for b in block.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
    }
    Command::new("sync").status()?;
    let started = std::time::Instant::now();
    for (i, &size) in sizes.iter().enumerate() {
        let mut f = std::fs::File::create(dir.join(format!("{i}.bin")))?;
        let mut left = size;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            f.write_all(&block[..n])?;
            left -= n as u64;
        }
        f.sync_all()?;
    }
    std::fs::File::open(dir)?.sync_all()?;
    let seconds = started.elapsed().as_secs_f64();
    std::fs::remove_dir_all(dir)?;
    Ok(seconds)
}

/// Sizes of the files directly under `dir` (none if it does not exist).
fn file_sizes(dir: &Path) -> Result<Vec<u64>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut sizes = Vec::new();
    for e in entries {
        let m = e?.metadata()?;
        if m.is_file() {
            sizes.push(m.len());
        }
    }
    Ok(sizes)
}

fn rss(mb: Option<f64>) -> String {
    mb.map(|m| format!("{m:.0} MB"))
        .unwrap_or_else(|| "n/a".into())
}

fn peer_of(rows: &[Row], clips: usize) -> Option<&Row> {
    rows.iter()
        .find(|r| r.clips == clips && r.name.starts_with("peer"))
}

/// The markdown table: one line per configuration.
fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| clips | configuration | wall s | clips/s | × peer | peak RSS |\n|---:|---|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let ratio = peer_of(rows, r.clips)
            .map(|p| format!("{:.1}×", r.clips_per_s() / p.clips_per_s()))
            .unwrap_or_else(|| "–".into());
        s += &format!(
            "| {} | {} | {:.2} | {:.0} | {} | {} |\n",
            r.clips,
            r.name,
            r.wall_s,
            r.clips_per_s(),
            ratio,
            rss(r.peak_rss_mb)
        );
    }
    s
}

/// The dataset of `n` clips, generated once under target/bench-data.
fn dataset(melctl: &Path, n: usize) -> Result<PathBuf> {
    let dir = root().join(format!("target/bench-data/leak-{n}"));
    let data = dir.join("data");
    if !data.join(".complete").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        let st = Command::new(melctl)
            .args(["demo", "--no-build", "--clips", &n.to_string()])
            .arg(&dir)
            .status()?;
        if !st.success() {
            bail!("generating {n} clips failed");
        }
        std::fs::write(data.join(".complete"), b"")?;
    }
    Ok(data)
}

/// Reads every WAV under `data` into the page cache, then writes back all dirty pages (a
/// previous run's output), so that no run pays for the writeback of the one before.
fn warm(data: &Path) -> Result<()> {
    let st = Command::new("sh")
        .arg("-c")
        .arg("find \"$0\" -name '*.wav' -print0 | xargs -0 cat > /dev/null && sync")
        .arg(data)
        .status()?;
    if !st.success() {
        bail!("warming the page cache failed");
    }
    Ok(())
}

/// One `melctl build` with `[backend, dtype, loader, sink]` and extra flags.
fn run_melctl(
    melctl: &Path,
    data: &Path,
    out: &Path,
    cache: &Path,
    n: usize,
    ([backend, dtype, loader, sink], extra): ([&str; 4], &[&str]),
    name: &str,
) -> Result<Row> {
    warm(data)?;
    let dest = out.join("h5");
    let _ = std::fs::remove_dir_all(&dest);
    let report = out.join("last-report.json");
    let config = out.join("bench-sink.toml");
    let (sink, toml) = match sink {
        "hdf5-gzip" => ("hdf5", "[hdf5]\nchunk_clips = 16\ngzip = 1\n"),
        other => (other, ""),
    };
    std::fs::write(&config, toml)?;
    let started = std::time::Instant::now();
    let o = Command::new(melctl)
        .args([
            "build",
            "--backend",
            backend,
            "--dtype",
            dtype,
            "--loader",
            loader,
            "--sink",
            sink,
        ])
        .arg("--config")
        .arg(&config)
        .arg("--input")
        .arg(data)
        .arg("--output")
        .arg(&dest)
        .arg("--cache-dir")
        .arg(cache)
        .arg("--report")
        .arg(&report)
        .args(extra)
        .output()?;
    let process_s = started.elapsed().as_secs_f64();
    if !o.status.success() {
        bail!("{name}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report)?)?;
    let bottlenecks: Vec<String> = r["splits"]
        .as_array()
        .map(|s| {
            s.iter()
                .map(|x| {
                    format!(
                        "{}: {}",
                        x["split"].as_str().unwrap_or("?"),
                        x["bottleneck"]["stage"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Row {
        clips: n,
        name: name.to_string(),
        wall_s: r["wall_seconds"].as_f64().unwrap_or(f64::NAN),
        process_s,
        peak_rss_mb: r["peak_rss_bytes"].as_f64().map(|b| b / 1e6),
        note: format!("bottleneck {}", bottlenecks.join(", ")),
        out_bytes: file_sizes(&dest)?,
    })
}

fn run_peer(data: &Path, out: &Path, n: usize) -> Result<Row> {
    warm(data)?;
    let dest = out.join("peer-h5");
    let _ = std::fs::remove_dir_all(&dest);
    let procs = std::thread::available_parallelism()
        .map(|p| p.get())
        .unwrap_or(1);
    let o = Command::new("/usr/bin/time")
        .arg("-v")
        .arg("python3")
        .arg(root().join("benches/peer_librosa.py"))
        .arg(data)
        .arg(&dest)
        .args(["--procs", &procs.to_string()])
        .env("OPENBLAS_NUM_THREADS", "1")
        .output()
        .context(
            "running the Python peer (needs /usr/bin/time, python3 with soundfile, librosa, h5py)",
        )?;
    if !o.status.success() {
        bail!("peer: {}", String::from_utf8_lossy(&o.stderr));
    }
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    // "peer soundfile+librosa+h5py: N clips in T s = ..."
    let wall = stdout
        .split(" clips in ")
        .nth(1)
        .and_then(|t| t.split(" s").next())
        .and_then(|t| t.trim().parse::<f64>().ok())
        .context("peer output not understood")?;
    let rss_kb = stderr
        .lines()
        .find(|l| l.contains("Maximum resident set size"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.trim().parse::<f64>().ok());
    Ok(Row {
        clips: n,
        name: format!("peer: soundfile + librosa + h5py, {procs} processes"),
        wall_s: wall,
        process_s: wall,
        peak_rss_mb: rss_kb.map(|k| k * 1024.0 / 1e6),
        note: "peak RSS of the largest single process".into(),
        out_bytes: file_sizes(&dest)?,
    })
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|p| p.get())
        .unwrap_or(0);
    format!("{cpu}, {cores} threads")
}

fn chrono_like_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// A horizontal bar chart of clips/s, one group per dataset size, the peer in grey.
fn chart(rows: &[Row], machine: &str, path: &Path) -> Result<()> {
    use plotters::prelude::*;
    let font = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
    ]
    .iter()
    .find_map(|p| std::fs::read(p).ok());
    let Some(font) = font else {
        println!("no DejaVuSans.ttf found (apt-get install fonts-dejavu-core): chart skipped");
        return Ok(());
    };
    plotters::style::register_font(
        "sans-serif",
        FontStyle::Normal,
        Box::leak(font.into_boxed_slice()),
    )
    .map_err(|_| anyhow::anyhow!("DejaVuSans.ttf is not a usable font"))?;
    let n = rows.len();
    let height = 120 + 26 * n as u32;
    let root_area = BitMapBackend::new(path, (1200, height)).into_drawing_area();
    root_area.fill(&WHITE)?;
    let max = rows.iter().map(Row::clips_per_s).fold(1.0, f64::max) * 1.18;
    let mut chart = ChartBuilder::on(&root_area)
        .caption(
            format!("melctl build, leak-4k: clips/s (higher is better) — {machine}"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(10)
        .build_cartesian_2d(0f64..max, 0f64..n as f64)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc("clips per second")
        .label_style(("sans-serif", 13))
        .draw()?;
    for (i, r) in rows.iter().enumerate() {
        let y = (n - 1 - i) as f64;
        let color = if r.name.starts_with("peer") {
            RGBColor(190, 190, 190)
        } else if r.name.starts_with("cuda") {
            RGBColor(160, 210, 80)
        } else if r.name.starts_with("wgpu") {
            RGBColor(230, 170, 90)
        } else {
            RGBColor(140, 180, 225)
        };
        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.0, y + 0.12), (r.clips_per_s(), y + 0.88)],
            color.filled(),
        )))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("{} clips · {} — {:.0}/s", r.clips, r.name, r.clips_per_s()),
            (max * 0.005, y + 0.72),
            ("sans-serif", 13).into_font().color(&BLACK),
        )))?;
    }
    root_area.present()?;
    Ok(())
}
