//! Naming the bottleneck: the stage busy for the largest share of the wall time, and
//! what to change about it.

use super::metrics::StageMetrics;
use crate::traits::LoaderStats;

/// The bottleneck and the advice.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Verdict {
    /// The limiting stage (`load`, `mel` or `write`), or `none` when no stage is saturated.
    pub stage: String,
    /// Its busy share of the wall time, 0..1.
    pub utilisation: f64,
    /// What to change, in words.
    pub advice: String,
}

/// Judges a run from its stage metrics and wall time.
pub fn verdict(stages: &[StageMetrics], wall_seconds: f64, loader: &LoaderStats) -> Verdict {
    let wall = wall_seconds.max(1e-9);
    let Some(top) = stages
        .iter()
        .max_by(|a, b| a.busy_seconds.total_cmp(&b.busy_seconds))
    else {
        return Verdict {
            stage: "none".into(),
            utilisation: 0.0,
            advice: "nothing ran".into(),
        };
    };
    let utilisation = top.busy_seconds / wall;
    if utilisation < 0.5 {
        return Verdict {
            stage: "none".into(),
            utilisation,
            advice: format!(
                "no stage is busy half the time (the busiest, {}, {:.0}%): stages wait on each other; try a bigger --batch or run.queue_depth",
                top.name,
                utilisation * 100.0
            ),
        };
    }
    let advice = match top.name.as_str() {
        "load" => match top.implementation.as_str() {
            "stream" if loader.workers > 0 => format!(
                "reading and decoding files is the limit ({} readers busy {:.0}% of the time): raise --readers if cores are idle, or use --loader memmap so later builds skip both",
                loader.workers,
                100.0 * loader.decode_seconds / (wall * loader.workers as f64)
            ),
            "stream" => "reading and decoding files is the limit: raise --readers, or use --loader memmap so later builds skip both".to_string(),
            "memmap" => "mapping the cache is the limit: the disk holding the cache is slow or cold; put run.cache_dir on a faster disk".to_string(),
            _ => "decoding dominates and nothing overlaps it: use --loader stream to decode while computing, or --loader memmap to decode once".to_string(),
        },
        "mel" => match top.implementation.as_str() {
            "cpu" => "the CPU mel backend is the limit: use a GPU (--backend cuda, or wgpu for other GPUs; see melctl devices) or more --threads".to_string(),
            _ => "the mel backend is the limit: raise --batch so each launch does more work".to_string(),
        },
        "write" => match top.implementation.as_str() {
            "hdf5-gzip" => "compressing and writing chunks is the limit: use hdf5.gzip = 1 (the fastest level) on more cores, or gzip = 0 if the disk keeps up".to_string(),
            _ => "writing is the limit: write to a faster disk, set output.fsync = false if a power cut may cost the build, or halve the bytes with [hdf5] chunk_clips = 16, gzip = 1 (compressed on all cores)".to_string(),
        },
        _ => String::new(),
    };
    Verdict {
        stage: top.name.clone(),
        utilisation,
        advice,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, imp: &str, busy: f64) -> StageMetrics {
        StageMetrics {
            busy_seconds: busy,
            ..StageMetrics::new(name, imp)
        }
    }

    #[test]
    fn names_the_busiest_stage_and_advises_for_it() {
        let s = [
            stage("load", "stream", 9.0),
            stage("mel", "cpu", 4.0),
            stage("write", "hdf5", 1.0),
        ];
        let readers = LoaderStats {
            workers: 4,
            decode_seconds: 36.0,
            ..LoaderStats::default()
        };
        let v = verdict(&s, 10.0, &readers);
        assert_eq!(v.stage, "load");
        assert!((v.utilisation - 0.9).abs() < 1e-12);
        assert!(
            v.advice.contains("--readers") && v.advice.contains("90%"),
            "{}",
            v.advice
        );
        let s2 = [stage("load", "preload", 9.0), stage("mel", "cpu", 1.0)];
        assert!(
            verdict(&s2, 10.0, &readers)
                .advice
                .contains("--loader stream")
        );
        let s = [
            stage("load", "preload", 1.0),
            stage("mel", "cpu", 8.0),
            stage("write", "hdf5", 1.0),
        ];
        let v = verdict(&s, 10.0, &LoaderStats::default());
        assert_eq!(v.stage, "mel");
        assert!(v.advice.contains("--backend cuda"));
        let s = [
            stage("load", "preload", 1.0),
            stage("mel", "cpu", 2.0),
            stage("write", "hdf5", 7.0),
        ];
        assert_eq!(verdict(&s, 10.0, &LoaderStats::default()).stage, "write");
        let v = verdict(&s, 100.0, &LoaderStats::default());
        assert_eq!(v.stage, "none");
        assert!(v.advice.contains("write"));
    }
}
