//! What to do about a bottleneck, in melctl's own words and flags: the library reports
//! typed facts (`melkit::core::pipeline::Verdict`), the CLI phrases them.

use melkit::core::pipeline::{Stage, Verdict};

/// The limiting stage's name, or `none`.
pub fn stage_name(v: &Verdict) -> &'static str {
    v.bottleneck.map_or("none", Stage::name)
}

/// Advice for `v`, in words that name melctl's flags and settings.
pub fn advice(v: &Verdict) -> String {
    let Some(stage) = v.bottleneck else {
        return match v.busiest {
            None => "nothing ran".into(),
            Some(b) => format!(
                "no stage is busy half the time (the busiest, {}, {:.0}%): stages wait on each other; try a bigger --batch or run.queue_depth",
                b.name(),
                v.utilisation * 100.0
            ),
        };
    };
    match (stage, v.implementation.as_str()) {
        (Stage::Load, "stream") => match v.worker_utilisation {
            Some(busy) => format!(
                "reading and decoding files is the limit ({} readers busy {:.0}% of the time): raise --readers if cores are idle, or use --loader memmap so later builds skip both",
                v.workers,
                busy * 100.0
            ),
            None => "reading and decoding files is the limit: raise --readers, or use --loader memmap so later builds skip both".into(),
        },
        (Stage::Load, "memmap") => "mapping the cache is the limit: the disk holding the cache is slow or cold; put run.cache_dir on a faster disk".into(),
        (Stage::Load, _) => "decoding dominates and nothing overlaps it: use --loader stream to decode while computing, or --loader memmap to decode once".into(),
        (Stage::Mel, "cpu") => "the CPU mel backend is the limit: use a GPU (--backend cuda, or wgpu for other GPUs; see melctl devices) or more --threads".into(),
        (Stage::Mel, _) => "the mel backend is the limit: raise --batch so each launch does more work".into(),
        (Stage::Write, "hdf5-gzip") => "compressing and writing chunks is the limit: use hdf5.gzip = 1 (the fastest level) on more cores, or gzip = 0 if the disk keeps up".into(),
        (Stage::Write, _) => "writing is the limit: write to a faster disk, set output.fsync = false if a power cut may cost the build, or halve the bytes with [hdf5] chunk_clips = 16, gzip = 1 (compressed on all cores)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use melkit::core::LoaderStats;
    use melkit::core::pipeline::{StageMetrics, verdict};

    fn stage(name: &str, imp: &str, busy: f64) -> StageMetrics {
        StageMetrics {
            busy_seconds: busy,
            ..StageMetrics::new(name, imp)
        }
    }

    #[test]
    fn advice_names_the_flag_that_helps() {
        let readers = LoaderStats {
            workers: 4,
            decode_seconds: 36.0,
            ..LoaderStats::default()
        };
        let v = verdict(
            &[stage("load", "stream", 9.0), stage("mel", "cpu", 4.0)],
            10.0,
            &readers,
        );
        let a = advice(&v);
        assert!(a.contains("--readers") && a.contains("90%"), "{a}");
        let v = verdict(
            &[stage("load", "preload", 9.0), stage("mel", "cpu", 1.0)],
            10.0,
            &readers,
        );
        assert!(advice(&v).contains("--loader stream"));
        let v = verdict(&[stage("mel", "cpu", 8.0)], 10.0, &LoaderStats::default());
        assert!(advice(&v).contains("--backend cuda"));
        assert_eq!(stage_name(&v), "mel");
        let v = verdict(
            &[stage("write", "hdf5", 7.0)],
            100.0,
            &LoaderStats::default(),
        );
        assert_eq!(stage_name(&v), "none");
        assert!(advice(&v).contains("write"));
        let v = verdict(
            &[stage("write", "hdf5-gzip", 7.0)],
            10.0,
            &LoaderStats::default(),
        );
        assert!(advice(&v).contains("gzip = 1"));
    }
}
