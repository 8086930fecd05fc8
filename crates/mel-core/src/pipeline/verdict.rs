//! Naming the bottleneck: the stage busy for the largest share of the wall time, as
//! typed facts. What to do about it is the application's to phrase (it knows its flags).

use super::metrics::StageMetrics;
use crate::traits::LoaderStats;

/// One of the pipeline's three stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Reading and decoding audio.
    Load,
    /// Computing spectrograms.
    Mel,
    /// Writing the output.
    Write,
}

impl Stage {
    /// The stage's name as the metrics record it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Load => "load",
            Stage::Mel => "mel",
            Stage::Write => "write",
        }
    }

    fn from_name(name: &str) -> Option<Stage> {
        [Stage::Load, Stage::Mel, Stage::Write]
            .into_iter()
            .find(|s| s.name() == name)
    }
}

/// What limited a run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Verdict {
    /// The limiting stage: the busiest, when it was busy at least half the wall time;
    /// `None` when no stage was (the stages waited on each other).
    pub bottleneck: Option<Stage>,
    /// The busiest stage, limiting or not.
    pub busiest: Option<Stage>,
    /// Its implementation (e.g. `stream`, `cpu`, `hdf5-gzip`).
    pub implementation: String,
    /// Its busy share of the wall time, 0..1.
    pub utilisation: f64,
    /// The loader's worker threads, when the busiest stage is the load stage.
    pub workers: usize,
    /// How busy those workers were, 0..1, when measured.
    pub worker_utilisation: Option<f64>,
}

/// Judges a run from its stage metrics and wall time.
pub fn verdict(stages: &[StageMetrics], wall_seconds: f64, loader: &LoaderStats) -> Verdict {
    let wall = wall_seconds.max(1e-9);
    let Some(top) = stages
        .iter()
        .max_by(|a, b| a.busy_seconds.total_cmp(&b.busy_seconds))
    else {
        return Verdict {
            bottleneck: None,
            busiest: None,
            implementation: String::new(),
            utilisation: 0.0,
            workers: 0,
            worker_utilisation: None,
        };
    };
    let utilisation = top.busy_seconds / wall;
    let busiest = Stage::from_name(&top.name);
    let load = busiest == Some(Stage::Load) && loader.workers > 0;
    Verdict {
        bottleneck: busiest.filter(|_| utilisation >= 0.5),
        busiest,
        implementation: top.implementation.clone(),
        utilisation,
        workers: if load { loader.workers } else { 0 },
        worker_utilisation: (load && loader.decode_seconds > 0.0)
            .then(|| loader.decode_seconds / (wall * loader.workers as f64)),
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
    fn names_the_busiest_stage_when_it_is_busy_half_the_time() {
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
        assert_eq!(v.bottleneck, Some(Stage::Load));
        assert_eq!(v.implementation, "stream");
        assert!((v.utilisation - 0.9).abs() < 1e-12);
        assert_eq!(v.workers, 4);
        assert!((v.worker_utilisation.unwrap() - 0.9).abs() < 1e-12);
        let s = [
            stage("load", "preload", 1.0),
            stage("mel", "cpu", 8.0),
            stage("write", "hdf5", 1.0),
        ];
        let v = verdict(&s, 10.0, &readers);
        assert_eq!((v.bottleneck, v.workers), (Some(Stage::Mel), 0));
        let s = [
            stage("load", "preload", 1.0),
            stage("mel", "cpu", 2.0),
            stage("write", "hdf5", 7.0),
        ];
        assert_eq!(
            verdict(&s, 10.0, &LoaderStats::default()).bottleneck,
            Some(Stage::Write)
        );
        let v = verdict(&s, 100.0, &LoaderStats::default());
        assert_eq!((v.bottleneck, v.busiest), (None, Some(Stage::Write)));
        assert_eq!(verdict(&[], 1.0, &readers).busiest, None);
    }
}
