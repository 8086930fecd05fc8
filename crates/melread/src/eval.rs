//! File-level evaluation: per-segment class probabilities of many files, in batches of
//! any size and order, become one decision per file (mean probability or majority
//! vote; a threshold for a binary positive/negative decision), with accuracy and a
//! confusion matrix.
//!
//! ```
//! use melread::eval::{Decision, FileEvaluator};
//!
//! # fn main() -> melread::Result<()> {
//! // Two files (labels 0 and 1), three segments each, two classes; rows are segments.
//! let mut ev = FileEvaluator::new(vec![0, 1], 2)?;
//! let probs = [0.9, 0.1, 0.6, 0.4, 0.2, 0.8, /* file 1: */ 0.3, 0.7, 0.4, 0.6, 0.6, 0.4];
//! ev.add(&probs, &[0, 0, 0, 1, 1, 1])?;
//! let report = ev.report(&Decision::MeanProbability);
//! assert_eq!(report.decisions, vec![Some(0), Some(1)]);
//! assert_eq!(report.accuracy(), 1.0);
//! # Ok(())
//! # }
//! ```

use mel_core::{Error, Result};

/// The most classes an evaluator scores.
pub const MAX_CLASSES: usize = 1 << 16;

/// How a file's segments become one decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    /// The class with the highest mean probability over the file's segments (ties: the
    /// lower class id).
    MeanProbability,
    /// The class most segments chose (each segment's highest probability; ties between
    /// classes go to the higher mean probability, then the lower class id).
    MajorityVote,
    /// Binary: the file is `positive` when the mean probability of `positive` over its
    /// segments is at least `threshold`; else negative. Reported as classes
    /// `[0 = negative, 1 = positive]`.
    MeanThreshold {
        /// The positive class id (e.g. `leak`).
        positive: usize,
        /// The decision threshold on the mean probability.
        threshold: f32,
    },
    /// Binary: each segment votes positive when its probability of `positive` is at
    /// least `threshold`; the file is positive when at least half its segments do.
    VoteThreshold {
        /// The positive class id.
        positive: usize,
        /// The per-segment threshold.
        threshold: f32,
    },
}

/// Accumulates per-segment probabilities per file. It keeps every segment's
/// probabilities (4 bytes × classes per segment), so any [`Decision`] can be reported
/// from one pass.
#[derive(Debug, Clone)]
pub struct FileEvaluator {
    classes: usize,
    truth: Vec<usize>,
    /// Sum of probabilities, `[files, classes]`, f64.
    sums: Vec<f64>,
    /// Segments whose highest probability is each class, `[files, classes]`.
    votes: Vec<u32>,
    /// Segments per file.
    segments: Vec<u32>,
    /// Every segment's probabilities per file, for per-segment thresholds chosen at
    /// report time (memory: 4 bytes × classes per segment).
    probs: Vec<Vec<f32>>,
    /// For a split of windows: each row's file (`add` takes rows, a Loader's
    /// `clip_index`); `None`: the ids given are files.
    file_of: Option<Vec<usize>>,
}

/// Decisions and figures for every file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileReport {
    /// Each file's decided class (for binary rules: 0 negative, 1 positive); `None` for
    /// a file none of whose segments were scored.
    pub decisions: Vec<Option<usize>>,
    /// Each file's true class in the report's classes (binary: 0 or 1).
    pub truth: Vec<usize>,
    /// Each file's score: the mean probability of the decided class (binary: of the
    /// positive class, or the share of positive votes).
    pub scores: Vec<f32>,
    /// `confusion[t][d]`: files of true class `t` decided as `d`.
    pub confusion: Vec<Vec<u64>>,
}

impl FileReport {
    /// Files with a decision.
    pub fn files(&self) -> usize {
        self.decisions.iter().filter(|d| d.is_some()).count()
    }

    /// Files decided correctly.
    pub fn correct(&self) -> usize {
        self.decisions
            .iter()
            .zip(&self.truth)
            .filter(|(d, t)| **d == Some(**t))
            .count()
    }

    /// Correct decisions over files with a decision (0 when there are none).
    pub fn accuracy(&self) -> f64 {
        match self.files() {
            0 => 0.0,
            n => self.correct() as f64 / n as f64,
        }
    }
}

impl FileEvaluator {
    /// An evaluator for files whose true classes are `truth` (file `i` has class
    /// `truth[i]`), scored over `classes` classes.
    pub fn new(truth: Vec<usize>, classes: usize) -> Result<Self> {
        if classes == 0 || classes > MAX_CLASSES {
            return Err(Error::config(
                "classes",
                format!("{classes}: must be within 1..={MAX_CLASSES}"),
            ));
        }
        if let Some((i, &t)) = truth.iter().enumerate().find(|&(_, &t)| t >= classes) {
            return Err(Error::Shape(format!(
                "file {i} has class {t}, not below {classes}"
            )));
        }
        let files = truth.len();
        let too_many = || {
            Error::limit(
                "FileEvaluator",
                format!("{files} files × {classes} classes of counters cannot be allocated"),
            )
        };
        let cells = files.checked_mul(classes).ok_or_else(too_many)?;
        let mut sums = Vec::new();
        let mut votes = Vec::new();
        sums.try_reserve_exact(cells)
            .and_then(|()| votes.try_reserve_exact(cells))
            .map_err(|_| too_many())?;
        sums.resize(cells, 0.0);
        votes.resize(cells, 0);
        Ok(FileEvaluator {
            classes,
            truth,
            sums,
            votes,
            segments: vec![0; files],
            probs: vec![Vec::new(); files],
            file_of: None,
        })
    }

    /// An evaluator for the clips of `split` (their labels, its label names), scored by
    /// a model trained on `trained_on`: refused unless the two splits share one label map
    /// and one mel configuration ([`Split::check_compatible`](crate::Split::check_compatible)),
    /// since class `k` of the model must be class `k` of `split`. Pass the same split
    /// twice to evaluate on the training split itself.
    /// A split of whole clips is scored per clip; a split of windows (`audio.windows`) per
    /// file, [`add`](Self::add) taking the split's rows (each a window) and finding
    /// their files.
    pub fn for_split(split: &crate::Split, trained_on: &crate::Split) -> Result<Self> {
        trained_on.check_compatible(split)?;
        let labels = split.labels();
        let firsts = match (split.whole(), split.windows()) {
            (Some(w), _) => Some(w.first_rows()),
            (_, Some(w)) => Some(w.first_rows()),
            _ => None,
        };
        let truth = match firsts {
            Some(rows) => rows.iter().map(|&r| labels[r] as usize).collect(),
            None => labels.iter().map(|&l| l as usize).collect(),
        };
        let mut ev = Self::new(truth, split.label_names().len())?;
        ev.file_of = split.windows().map(|w| w.file_of().to_vec());
        Ok(ev)
    }

    /// Classes scored.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Adds a batch: `probs` holds `files.len()` rows of `classes` probabilities, row
    /// `k` a segment of file `files[k]` (for an evaluator of a split of windows, `files`
    /// are the split's rows, each a window of its file). Rows may come in any order and batches may mix
    /// files; a file's segments may span batches.
    pub fn add(&mut self, probs: &[f32], files: &[usize]) -> Result<()> {
        let mapped: Vec<usize>;
        let files = match &self.file_of {
            None => files,
            Some(map) => {
                if let Some(&r) = files.iter().find(|&&r| r >= map.len()) {
                    return Err(Error::Shape(format!(
                        "window {r} is beyond the split's {} windows",
                        map.len()
                    )));
                }
                mapped = files.iter().map(|&r| map[r]).collect();
                &mapped
            }
        };
        if probs.len() != files.len() * self.classes {
            return Err(Error::Shape(format!(
                "{} probabilities for {} segments of {} classes",
                probs.len(),
                files.len(),
                self.classes
            )));
        }
        if let Some(&f) = files.iter().find(|&&f| f >= self.truth.len()) {
            return Err(Error::Shape(format!(
                "file {f} is beyond the evaluator's {} files",
                self.truth.len()
            )));
        }
        if let Some(k) = probs.iter().position(|p| !(p.is_finite() && *p >= 0.0)) {
            return Err(Error::Shape(format!(
                "probability {} of segment {} is {}: probabilities are finite and not negative",
                k % self.classes,
                k / self.classes,
                probs[k]
            )));
        }
        let c = self.classes;
        for (row, &f) in probs.chunks_exact(c).zip(files) {
            for (s, &p) in self.sums[f * c..(f + 1) * c].iter_mut().zip(row) {
                *s += p as f64;
            }
            self.votes[f * c + argmax(row)] += 1;
            self.segments[f] += 1;
            self.probs[f].extend_from_slice(row);
        }
        Ok(())
    }

    /// Checks `rule` against the classes: a positive class among them, a threshold
    /// within [0, 1]. [`report`](Self::report) assumes a checked rule.
    pub fn check_rule(&self, rule: &Decision) -> Result<()> {
        match *rule {
            Decision::MeanProbability | Decision::MajorityVote => Ok(()),
            Decision::MeanThreshold {
                positive,
                threshold,
            }
            | Decision::VoteThreshold {
                positive,
                threshold,
            } => {
                if positive >= self.classes {
                    return Err(Error::config(
                        "positive",
                        format!("class {positive} is not below {}", self.classes),
                    ));
                }
                if !(0.0..=1.0).contains(&threshold) {
                    return Err(Error::config(
                        "threshold",
                        format!("{threshold} is not within [0, 1]"),
                    ));
                }
                Ok(())
            }
        }
    }

    /// Decides every file by `rule`.
    pub fn report(&self, rule: &Decision) -> FileReport {
        let c = self.classes;
        let files = self.truth.len();
        let binary = match *rule {
            Decision::MeanThreshold { positive, .. } | Decision::VoteThreshold { positive, .. } => {
                Some(positive)
            }
            _ => None,
        };
        let out_classes = if binary.is_some() { 2 } else { c };
        let mut decisions = Vec::with_capacity(files);
        let mut scores = Vec::with_capacity(files);
        let truth: Vec<usize> = self
            .truth
            .iter()
            .map(|&t| match binary {
                Some(p) => usize::from(t == p),
                None => t,
            })
            .collect();
        for f in 0..files {
            let n = self.segments[f];
            if n == 0 {
                decisions.push(None);
                scores.push(f32::NAN);
                continue;
            }
            let mean: Vec<f64> = self.sums[f * c..(f + 1) * c]
                .iter()
                .map(|s| s / n as f64)
                .collect();
            let (d, score) = match *rule {
                Decision::MeanProbability => {
                    let d = argmax_f64(&mean);
                    (d, mean[d] as f32)
                }
                Decision::MajorityVote => {
                    let votes = &self.votes[f * c..(f + 1) * c];
                    let best = *votes.iter().max().expect("classes > 0");
                    let d = (0..c)
                        .filter(|&k| votes[k] == best)
                        .fold(None, |acc: Option<usize>, k| match acc {
                            Some(a) if mean[a] >= mean[k] => Some(a),
                            _ => Some(k),
                        })
                        .expect("a class with the most votes");
                    (d, votes[d] as f32 / n as f32)
                }
                Decision::MeanThreshold {
                    positive,
                    threshold,
                } => {
                    let p = mean.get(positive).copied().unwrap_or(0.0) as f32;
                    (usize::from(p >= threshold), p)
                }
                Decision::VoteThreshold {
                    positive,
                    threshold,
                } => {
                    let yes = self.probs[f]
                        .chunks_exact(c)
                        .filter(|row| row.get(positive).is_some_and(|&p| p >= threshold))
                        .count();
                    let share = yes as f32 / n as f32;
                    (usize::from(2 * yes >= n as usize), share)
                }
            };
            decisions.push(Some(d));
            scores.push(score);
        }
        let mut confusion = vec![vec![0u64; out_classes]; out_classes];
        for (d, &t) in decisions.iter().zip(&truth) {
            if let Some(d) = d {
                confusion[t][*d] += 1;
            }
        }
        FileReport {
            decisions,
            truth,
            scores,
            confusion,
        }
    }
}

/// The index of the largest value (the first of equals; NaN never wins).
fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (k, &v) in row.iter().enumerate() {
        if v > row[best] || row[best].is_nan() && !v.is_nan() {
            best = k;
        }
    }
    best
}

fn argmax_f64(row: &[f64]) -> usize {
    let mut best = 0;
    for (k, &v) in row.iter().enumerate() {
        if v > row[best] || row[best].is_nan() && !v.is_nan() {
            best = k;
        }
    }
    best
}

/// One call: decides the files of one batch of per-segment probabilities (`probs`:
/// `files.len()` rows of `classes`), where file `i` has true class `truth[i]`.
pub fn evaluate_files(
    probs: &[f32],
    files: &[usize],
    truth: &[usize],
    classes: usize,
    rule: &Decision,
) -> Result<FileReport> {
    let mut ev = FileEvaluator::new(truth.to_vec(), classes)?;
    ev.add(probs, files)?;
    Ok(ev.report(rule))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_probabilities_and_rules_out_of_range_are_refused() {
        assert!(FileEvaluator::new(vec![0], MAX_CLASSES + 1).is_err());
        assert!(FileEvaluator::new(vec![0], 0).is_err());
        let mut ev = FileEvaluator::new(vec![0, 1], 2).unwrap();
        for bad in [f32::NAN, f32::INFINITY, -0.1] {
            let e = ev.add(&[0.5, bad], &[0]).unwrap_err().to_string();
            assert!(e.contains("probability 1 of segment 0"), "{e}");
        }
        ev.add(&[0.5, 0.5], &[0]).unwrap();
        let far = Decision::MeanThreshold {
            positive: 2,
            threshold: 0.5,
        };
        assert!(ev.check_rule(&far).is_err());
        for threshold in [1.5, -0.1, f32::NAN] {
            let rule = Decision::VoteThreshold {
                positive: 1,
                threshold,
            };
            assert!(ev.check_rule(&rule).is_err(), "{threshold}");
        }
        assert!(ev.check_rule(&Decision::MajorityVote).is_ok());
    }

    /// Three files, three classes; segments of files interleaved across two batches.
    fn evaluator() -> FileEvaluator {
        let mut ev = FileEvaluator::new(vec![0, 1, 2], 3).unwrap();
        // file 0: two segments for class 0 (weakly), one strongly for class 1
        // file 1: all for class 1
        // file 2: votes split 1-1 between classes 2 and 0; mean favours 2
        ev.add(
            &[
                0.5, 0.3, 0.2, // f0
                0.1, 0.8, 0.1, // f1
                0.6, 0.0, 0.4, // f2
            ],
            &[0, 1, 2],
        )
        .unwrap();
        ev.add(
            &[
                0.5, 0.4, 0.1, // f0
                0.0, 0.9, 0.1, // f0
                0.0, 0.1, 0.9, // f2
                0.2, 0.7, 0.1, // f1
            ],
            &[0, 0, 2, 1],
        )
        .unwrap();
        ev
    }

    #[test]
    fn mean_probability_and_majority_vote_differ_where_they_should() {
        let ev = evaluator();
        let mean = ev.report(&Decision::MeanProbability);
        // file 0: means (0.333, 0.5, 0.133) → class 1; file 2: (0.3, 0.05, 0.65) → 2
        assert_eq!(mean.decisions, vec![Some(1), Some(1), Some(2)]);
        assert_eq!(mean.correct(), 2);
        assert!((mean.accuracy() - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(
            mean.confusion,
            vec![vec![0, 1, 0], vec![0, 1, 0], vec![0, 0, 1]]
        );
        let vote = ev.report(&Decision::MajorityVote);
        // file 0: votes 0,0,1 → class 0; file 2: one vote each for 0 and 2, mean breaks it: 2
        assert_eq!(vote.decisions, vec![Some(0), Some(1), Some(2)]);
        assert_eq!(vote.accuracy(), 1.0);
        assert!((vote.scores[0] - 2.0 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn binary_thresholds() {
        let ev = evaluator();
        // positive = class 2. Mean P(2): f0 0.133, f1 0.1, f2 0.65.
        let r = ev.report(&Decision::MeanThreshold {
            positive: 2,
            threshold: 0.5,
        });
        assert_eq!(r.decisions, vec![Some(0), Some(0), Some(1)]);
        assert_eq!(r.truth, vec![0, 0, 1]);
        assert_eq!(r.confusion, vec![vec![2, 0], vec![0, 1]]);
        let r = ev.report(&Decision::MeanThreshold {
            positive: 2,
            threshold: 0.7,
        });
        assert_eq!(r.decisions[2], Some(0), "a higher threshold misses file 2");
        assert_eq!(r.confusion, vec![vec![2, 0], vec![1, 0]]);
        // Votes: f2's segments P(2) = 0.4, 0.9 → one of two at 0.5: half → positive.
        let r = ev.report(&Decision::VoteThreshold {
            positive: 2,
            threshold: 0.5,
        });
        assert_eq!(r.decisions, vec![Some(0), Some(0), Some(1)]);
        assert!((r.scores[2] - 0.5).abs() < 1e-6);
        let r = ev.report(&Decision::VoteThreshold {
            positive: 2,
            threshold: 0.95,
        });
        assert_eq!(r.decisions[2], Some(0));
    }

    #[test]
    fn unscored_files_and_bad_input() {
        let mut ev = FileEvaluator::new(vec![0, 1], 2).unwrap();
        ev.add(&[0.2, 0.8], &[1]).unwrap();
        let r = ev.report(&Decision::MeanProbability);
        assert_eq!(r.decisions, vec![None, Some(1)]);
        assert_eq!((r.files(), r.accuracy()), (1, 1.0));
        assert!(
            ev.add(&[0.2, 0.8], &[2]).is_err(),
            "file beyond the evaluator"
        );
        assert!(ev.add(&[0.2, 0.8, 0.1], &[0]).is_err(), "ragged rows");
        assert!(
            FileEvaluator::new(vec![3], 2).is_err(),
            "truth beyond classes"
        );
        let one = evaluate_files(&[0.7, 0.3], &[0], &[0], 2, &Decision::MajorityVote).unwrap();
        assert_eq!(one.decisions, vec![Some(0)]);
    }
}
