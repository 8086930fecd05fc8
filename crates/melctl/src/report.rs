//! The closing summary of a build, as text and as JSON.

use std::time::Duration;

use crate::build::BuildReport;

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Human-readable byte count.
pub fn bytes(n: u64) -> String {
    let n = n as f64;
    if n >= 1e9 {
        format!("{:.2} GB", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.1} MB", n / 1e6)
    } else {
        format!("{:.1} kB", n / 1e3)
    }
}

/// The text summary printed at the end of a build.
pub fn text(r: &BuildReport) -> String {
    let mut s = String::new();
    let clips: usize = r.splits.iter().map(|x| x.clips).sum();
    for x in &r.splits {
        let busiest = [("decode", x.load), ("mel", x.mel), ("write", x.write)]
            .into_iter()
            .max_by_key(|(_, d)| *d)
            .map(|(n, _)| n)
            .unwrap_or("-");
        s += &format!(
            "{:<12} {:>7} clips -> {} ({})\n",
            x.split,
            x.clips,
            x.output.display(),
            bytes(x.output_bytes)
        );
        s += &format!(
            "             decode {:>7.2} s  mel {:>7.2} s  write {:>7.2} s  wall {:>7.2} s  {:>8.0} clips/s  (slowest: {busiest}; arena {})\n",
            secs(x.load),
            secs(x.mel),
            secs(x.write),
            secs(x.wall),
            x.clips as f64 / secs(x.wall).max(1e-9),
            bytes(x.arena_bytes as u64)
        );
        for f in &x.skipped {
            s += &format!("             skipped {}: {}\n", f.path.display(), f.reason);
        }
    }
    let skipped: usize = r.splits.iter().map(|x| x.skipped.len()).sum();
    s += &format!(
        "total        {clips:>7} clips in {:.2} s = {:.0} clips/s on {} threads; {} skipped; peak memory {}\n",
        secs(r.wall),
        clips as f64 / secs(r.wall).max(1e-9),
        r.threads,
        skipped,
        r.peak_rss_bytes
            .map(bytes)
            .unwrap_or_else(|| "unknown".into())
    );
    s
}

/// The JSON report (`--report FILE.json`).
pub fn json(r: &BuildReport, config_json: &str) -> serde_json::Value {
    let splits: Vec<serde_json::Value> = r
        .splits
        .iter()
        .map(|x| {
            serde_json::json!({
                "split": x.split,
                "files": x.files,
                "clips": x.clips,
                "output": x.output,
                "output_bytes": x.output_bytes,
                "seconds": {"decode": secs(x.load), "mel": secs(x.mel), "write": secs(x.write), "wall": secs(x.wall)},
                "clips_per_second": x.clips as f64 / secs(x.wall).max(1e-9),
                "arena_bytes": x.arena_bytes,
                "skipped": x.skipped,
            })
        })
        .collect();
    serde_json::json!({
        "melctl_version": env!("CARGO_PKG_VERSION"),
        "config": serde_json::from_str::<serde_json::Value>(config_json).unwrap_or_default(),
        "threads": r.threads,
        "wall_seconds": secs(r.wall),
        "peak_rss_bytes": r.peak_rss_bytes,
        "splits": splits,
    })
}
