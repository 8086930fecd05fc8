//! Trains a small convolutional classifier with candle on a melctl output and evaluates
//! it per file:
//!
//! ```sh
//! cargo run --release -p melread --example train -- --data OUT_DIR [--epochs N] [--batch N]
//! ```
//!
//! With its defaults it learns the real-speech keyword corpus
//! (`scripts/make_speech_corpus.py`, built with `--preset speech-16k`) to a file-level
//! accuracy above 0.9 on speakers it never heard, in about a minute on 2 cores.
//!
//! Reads `OUT_DIR/training.*` (HDF5 or npy) through melread's loader: segments
//! (`[n_mels, frames]` spectrograms; a whole clip when the output has no segmentation)
//! in a seeded shuffle, normalised per mel bin with the statistics stored in the output
//! (computed in one pass when it has none). After each epoch it reports segment- and
//! file-level accuracy on `validation`, every file's segments scored in large batches;
//! it ends with `file-level accuracy on testing: A (N files)`.
//!
//! On whole clips (`audio.length = "whole"`), give `--max-frames M` (train on duration
//! buckets; each clip is scored whole) or `--crop N` (train on random crops of N frames;
//! each file is scored over all its windows of N frames, every N/2): the network pools
//! over each clip's real frames only (the batch's `lengths`).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use candle_core::{D, DType, Device, Tensor};
use candle_nn::{BatchNorm, Conv2d, Conv2dConfig, Linear, Optimizer, VarBuilder, VarMap};
use clap::Parser;
use melread::eval::{Decision, FileEvaluator, FileReport};
use melread::{Loader, LoaderOptions, MelStats, Shuffle, Split, TensorFloat, Unit};

/// The example's options.
#[derive(Debug, Clone, Parser)]
#[command(about = "Train a small CNN with candle on a melctl output; file-level evaluation")]
pub struct Args {
    /// The output folder of `melctl build` (holding training, validation and testing).
    #[arg(long)]
    pub data: PathBuf,
    /// Passes over the training split.
    #[arg(long, default_value_t = 6)]
    pub epochs: usize,
    /// Segments per training batch (default: a fiftieth of an epoch, within 16..=256,
    /// so a small split still gets enough optimizer steps).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Stop each epoch after this many training steps (quick checks).
    #[arg(long)]
    pub steps: Option<usize>,
    /// AdamW's learning rate.
    #[arg(long, default_value_t = 2e-3)]
    pub lr: f64,
    /// Seed of the shuffle and of the weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Loader threads (default: all cores).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Segments per evaluation batch (the segments of many files at once).
    #[arg(long, default_value_t = 8192)]
    pub eval_batch: usize,
    /// Whole clips: train on random crops of this many frames; score each file over all
    /// its windows of that many frames.
    #[arg(long)]
    pub crop: Option<usize>,
    /// Whole clips: train on duration buckets of at most this many frames a batch; score
    /// each clip whole.
    #[arg(long)]
    pub max_frames: Option<usize>,
}

/// The largest batch either flag takes (the loader also bounds a batch's bytes).
const MAX_BATCH: usize = 1 << 20;

impl Args {
    /// Refuses a value no training can use, naming the flag: a learning rate that is not
    /// a finite number in (0, 1] (`--lr nan` would train at chance), zero or absurd
    /// counts.
    pub fn check(&self) -> Result<()> {
        if !(self.lr.is_finite() && self.lr > 0.0 && self.lr <= 1.0) {
            bail!(
                "--lr {}: the learning rate must be a finite number above 0 and at most 1",
                self.lr
            );
        }
        for (flag, value, max) in [
            ("--epochs", self.epochs, 1_000_000),
            ("--batch", self.batch.unwrap_or(1), MAX_BATCH),
            ("--eval-batch", self.eval_batch, MAX_BATCH),
            ("--steps", self.steps.unwrap_or(1), usize::MAX),
            ("--workers", self.workers.unwrap_or(1), 1024),
        ] {
            if value == 0 || value > max {
                bail!("{flag} {value}: must be within 1..={max}");
            }
        }
        Ok(())
    }
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// The training loss of every step.
    pub losses: Vec<f32>,
    /// Per epoch: validation segment accuracy and file-level report.
    pub validation: Vec<(f64, FileReport)>,
    /// File-level report on testing.
    pub testing: FileReport,
}

/// Three convolutions over time, dilated 1, 2 and 4 (the first spans every mel bin, so
/// mel bins act as its input channels), each batch-normalised, then the maximum and the
/// mean over time and a linear layer: a keyword is recognised wherever in the clip it is
/// spoken. The convolutions are candle's 2-D ones with a kernel one bin high after the
/// first: in candle 0.11 on the CPU the 1-D convolution's gradient did not train (the
/// same network built with `conv1d` stayed at chance on the speech corpus; with these it
/// reaches 1.0).
struct Net {
    layers: Vec<(Conv2d, BatchNorm)>,
    fc: Linear,
}

/// Channels of each convolution.
const WIDTH: usize = 64;

impl Net {
    /// Unpadded convolutions: each shortens the sequence by (kernel − 1) × dilation, so
    /// the kernel is the widest of 5, 3, 1 that leaves at least one frame (a leak-4k
    /// segment has 5 frames: 1, per-frame layers).
    fn new(vb: VarBuilder, classes: usize, n_mels: usize, frames: usize) -> Result<Net> {
        let dilations = [1, 2, 4];
        let span: usize = dilations.iter().sum();
        let kernel = [5, 3, 1]
            .into_iter()
            .find(|&k| (k - 1) * span < frames)
            .unwrap_or(1);
        let layers = dilations
            .iter()
            .enumerate()
            .map(|(k, &dilation)| {
                let (inputs, height) = if k == 0 { (1, n_mels) } else { (WIDTH, 1) };
                let vb = vb.pp(format!("c{k}"));
                // Initial values are replaced by `seed_weights`.
                let w = vb.get_with_hints(
                    (WIDTH, inputs, height, kernel),
                    "weight",
                    candle_nn::Init::Const(0.0),
                )?;
                let b = vb.get_with_hints(WIDTH, "bias", candle_nn::Init::Const(0.0))?;
                let cfg = Conv2dConfig {
                    dilation,
                    ..Conv2dConfig::default()
                };
                Ok((
                    Conv2d::new(w, Some(b), cfg),
                    candle_nn::batch_norm(WIDTH, 1e-5, vb.pp("bn"))?,
                ))
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Net {
            layers,
            fc: candle_nn::linear(2 * WIDTH, classes, vb.pp("fc"))?,
        })
    }

    /// `[batch, n_mels, frames]` → logits `[batch, classes]`; `train` makes the batch
    /// normalisations use (and update) the batch's statistics.
    fn forward_t(&self, x: &Tensor, train: bool) -> candle_core::Result<Tensor> {
        self.forward_masked(x, None, train)
    }

    /// [`forward_t`](Self::forward_t) of items whose real frames are `lengths` (zeros
    /// after them): the pooling sees the frames each item's real frames reach only.
    fn forward_masked(
        &self,
        x: &Tensor,
        lengths: Option<&[usize]>,
        train: bool,
    ) -> candle_core::Result<Tensor> {
        // [batch, 1, n_mels, frames] → [batch, WIDTH, 1, frames'] after each layer.
        let frames = x.dim(D::Minus1)?;
        let mut h = x.unsqueeze(1)?;
        for (conv, bn) in &self.layers {
            h = h.apply(conv)?.apply_t(bn, train)?.relu()?;
        }
        let h = h.squeeze(2)?;
        let pooled = match lengths {
            None => Tensor::cat(&[h.max(D::Minus1)?, h.mean(D::Minus1)?], 1)?,
            Some(lengths) => {
                let out = h.dim(D::Minus1)?;
                let shrink = frames - out;
                let (mask, counts) = valid_mask(lengths, shrink, out, x.device())?;
                let masked = h.broadcast_mul(&mask)?;
                // Padding positions pushed far below any activation (ReLU: ≥ 0).
                let lowered = masked.broadcast_add(&((mask - 1.0)? * 1e4)?)?;
                let mean = masked.sum(D::Minus1)?.broadcast_div(&counts)?;
                Tensor::cat(&[lowered.max(D::Minus1)?, mean], 1)?
            }
        };
        pooled.apply(&self.fc)
    }
}

/// For items of `lengths` real frames after convolutions that shortened each by
/// `shrink` to `out` frames: a mask `[batch, 1, out]` (1 where an output frame sees only
/// real frames) and each item's count of such frames `[batch, 1]` (at least 1).
fn valid_mask(
    lengths: &[usize],
    shrink: usize,
    out: usize,
    device: &Device,
) -> candle_core::Result<(Tensor, Tensor)> {
    let mut mask = vec![0f32; lengths.len() * out];
    let mut counts = Vec::with_capacity(lengths.len());
    for (i, &n) in lengths.iter().enumerate() {
        let valid = n.saturating_sub(shrink).clamp(1, out);
        mask[i * out..i * out + valid].fill(1.0);
        counts.push(valid as f32);
    }
    Ok((
        Tensor::from_vec(mask, (lengths.len(), 1, out), device)?,
        Tensor::from_vec(counts, (lengths.len(), 1), device)?,
    ))
}

/// Scores every segment of `split` in batches of `batch` segments (many files per
/// batch) and decides each file by mean probability: (segment accuracy, file report).
fn evaluate(scorer: &Scorer, split: &Arc<Split>) -> Result<(f64, FileEvaluator)> {
    let Scorer {
        net,
        training: trained_on,
        stats,
        batch,
        workers,
        device,
        crop,
    } = *scorer;
    if split.whole().is_some() {
        let how = whole::How {
            batch,
            workers,
            crop,
        };
        return whole::evaluate(net, split, trained_on, stats, how, device);
    }
    let loader = Loader::new(
        split.clone(),
        LoaderOptions {
            unit: Unit::Segment,
            batch_size: batch,
            shuffle: Shuffle::None,
            normalize: Some(stats.clone()),
            workers,
            prefetch: 2,
            ..LoaderOptions::default()
        },
    )?;
    let mut files = FileEvaluator::for_split(split, trained_on)?;
    let (mut right, mut total) = (0usize, 0usize);
    for b in loader.epoch(0) {
        let b = b?;
        let clips: Vec<usize> = b.ids().iter().map(|id| id.clip).collect();
        let labels = b.labels().to_vec();
        let (x, _) = b.into_tensors(device, TensorFloat::F32)?;
        let probs = candle_nn::ops::softmax(&net.forward_t(&x, false)?, D::Minus1)?;
        let guess: Vec<u32> = probs.argmax(D::Minus1)?.to_vec1()?;
        right += guess
            .iter()
            .zip(&labels)
            .filter(|(g, l)| **g as i64 == **l)
            .count();
        total += labels.len();
        let flat: Vec<f32> = probs.flatten_all()?.to_vec1()?;
        files.add(&flat, &clips)?;
    }
    Ok((right as f64 / total.max(1) as f64, files))
}

/// Re-initialises every weight from `seed` (candle's CPU generator cannot be seeded):
/// Kaiming-uniform weights, zero biases, batch normalisations the identity (scale and
/// running variance 1), in name order, so a run is reproducible.
fn seed_weights(varmap: &VarMap, seed: u64) -> Result<()> {
    let mut state = seed ^ 0x5EED;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    let vars = varmap.data().lock().expect("varmap lock");
    let mut names: Vec<&String> = vars.keys().collect();
    names.sort();
    for name in names {
        let var = &vars[name];
        let dims = var.dims().to_vec();
        let n: usize = dims.iter().product();
        let values: Vec<f32> = if dims.len() > 1 {
            let fan_in: usize = dims[1..].iter().product();
            let bound = (6.0 / fan_in as f32).sqrt();
            (0..n).map(|_| next() * bound).collect()
        } else if name.ends_with("bn.weight") || name.ends_with("bn.running_var") {
            vec![1.0; n]
        } else {
            vec![0.0; n]
        };
        var.set(&Tensor::from_vec(values, dims, var.device())?)?;
    }
    Ok(())
}

/// Trains and evaluates as the options say, writing progress to `log`. Refuses bad
/// options ([`Args::check`]), splits that do not share training's label map and mel
/// configuration, and a loss that stops being a number (training diverged).
pub fn run(args: &Args, log: &mut dyn Write) -> Result<Report> {
    args.check()?;
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let training = open_split(args, "training")?;
    let validation = open_split(args, "validation")?;
    let testing = open_split(args, "testing")?;
    // Before any training: the model's class k must be class k of every split.
    for other in [&validation, &testing] {
        training.check_compatible(other)?;
    }
    let stats = normalisation(&training, workers, log)?;

    let device = Device::Cpu;
    let (net, mut opt) = build_model(&training, args, &device)?;
    let loader = training_loader(&training, args, &stats, workers)?;
    let scorer = Scorer {
        net: &net,
        training: &training,
        stats: &stats,
        batch: args.eval_batch,
        workers,
        device: &device,
        crop: args.crop.filter(|_| training.whole().is_some()),
    };

    let mut losses = Vec::new();
    let mut validation_reports = Vec::new();
    for epoch in 0..args.epochs {
        let t = Instant::now();
        let first = losses.len();
        train_epoch(&net, &mut opt, &loader, epoch, args, &device, &mut losses)?;
        let trained = losses.len() - first;
        let mean_loss = losses[first..].iter().sum::<f32>() / trained.max(1) as f32;
        let (seg_acc, files) = scorer.evaluate(&validation)?;
        let report = files.report(&Decision::MeanProbability);
        let padding = match training.whole() {
            Some(_) => format!(
                ", padding {:.1}%",
                100.0 * loader.padding_share(epoch as u64)
            ),
            None => String::new(),
        };
        writeln!(
            log,
            "epoch {}: {trained} steps, loss {mean_loss:.4}{padding} ({:.1} s); validation: segment accuracy {seg_acc:.3}, file-level accuracy {:.3} ({} files)",
            epoch + 1,
            t.elapsed().as_secs_f64(),
            report.accuracy(),
            report.files()
        )?;
        validation_reports.push((seg_acc, report));
    }

    let testing_report = test(&scorer, &testing, log)?;
    Ok(Report {
        losses,
        validation: validation_reports,
        testing: testing_report,
    })
}

/// Opens the split `name` of `args.data`, refusing one without clips.
fn open_split(args: &Args, name: &str) -> Result<Arc<Split>> {
    let split = Split::open_in(&args.data, name)
        .with_context(|| format!("opening the {name} split of {}", args.data.display()))?;
    // An empty split would train on nothing, or score "0.000 of 0 files".
    if split.clips() == 0 {
        anyhow::bail!(
            "the {name} split of {} holds no clips (were all its files skipped?): there is nothing to {}",
            args.data.display(),
            if name == "training" {
                "train on"
            } else {
                "score"
            }
        );
    }
    Ok(Arc::new(split))
}

/// The normalisation statistics of `training` (stored, or computed in one pass), logged
/// with what training holds.
fn normalisation(training: &Split, workers: usize, log: &mut dyn Write) -> Result<MelStats> {
    let t = Instant::now();
    let stats = training.stats(workers)?;
    let source = if training.stored_stats().is_some() {
        "stored in the output"
    } else {
        "computed from training"
    };
    if let Some(w) = training.whole() {
        let frames = w.all_frames();
        writeln!(
            log,
            "training: {} whole clips of {} to {} frames, {} ({:?}); normalisation {source} ({:.2} s)",
            w.clips(),
            frames.iter().min().unwrap_or(&0),
            frames.iter().max().unwrap_or(&0),
            training.dtype().name(),
            training.access(),
            t.elapsed().as_secs_f64()
        )?;
        return Ok(stats);
    }
    writeln!(
        log,
        "training: {} clips x {} segments of {:?} {} ({:?}); normalisation {source} ({:.2} s)",
        training.clips(),
        training.segments_per_clip(),
        training.segment_shape(),
        training.dtype().name(),
        training.access(),
        t.elapsed().as_secs_f64()
    )?;
    Ok(stats)
}

/// The network for `training`'s classes and segment shape, its weights seeded, and its
/// optimizer.
fn build_model(training: &Split, args: &Args, device: &Device) -> Result<(Net, candle_nn::AdamW)> {
    let classes = training.label_names().len();
    let [n_mels, mut frames] = training.segment_shape();
    if let Some(w) = training.whole() {
        // The shortest item the network sees: a crop, or the shortest whole clip.
        let shortest = w.all_frames().iter().copied().min().unwrap_or(1);
        frames = args.crop.unwrap_or(shortest);
    }
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
    let net = Net::new(vb, classes, n_mels, frames)?;
    seed_weights(&varmap, args.seed)?;
    let opt = candle_nn::AdamW::new_lr(varmap.all_vars(), args.lr)?;
    Ok((net, opt))
}

/// The training loader: normalised segments in a seeded, buffered shuffle, batches of
/// `--batch` (default: a fiftieth of an epoch, within 16..=256).
fn training_loader(
    training: &Arc<Split>,
    args: &Args,
    stats: &MelStats,
    workers: usize,
) -> Result<Loader> {
    let segments = match training.whole() {
        Some(w) => w.clips(),
        None => training.clips() * training.segments_per_clip(),
    };
    let batch = args.batch.unwrap_or((segments / 50).clamp(16, 256));
    if training.whole().is_some() && args.crop.is_none() == args.max_frames.is_none() {
        bail!(
            "training holds whole clips: give --crop N (random crops) or --max-frames M (duration buckets), one of them"
        );
    }
    Ok(Loader::new(
        training.clone(),
        LoaderOptions {
            unit: Unit::Segment,
            crop_frames: args.crop.filter(|_| training.whole().is_some()),
            max_frames: args.max_frames.filter(|_| training.whole().is_some()),
            batch_size: batch,
            shuffle: Shuffle::Buffered { buffer: 16_384 },
            seed: args.seed,
            normalize: Some(stats.clone()),
            workers,
            prefetch: 4,
            ..LoaderOptions::default()
        },
    )?)
}

/// One epoch's training steps (at most `--steps`), each step's loss appended to
/// `losses`; a loss that is not a number stops the run.
fn train_epoch(
    net: &Net,
    opt: &mut candle_nn::AdamW,
    loader: &Loader,
    epoch: usize,
    args: &Args,
    device: &Device,
    losses: &mut Vec<f32>,
) -> Result<()> {
    let steps = args.steps.unwrap_or(usize::MAX);
    let first = losses.len();
    let whole = loader.split().whole().is_some();
    for b in loader.epoch(epoch as u64).take(steps) {
        let b = b?;
        let lengths = b.lengths().to_vec();
        let (x, y) = b.into_tensors(device, TensorFloat::F32)?;
        let logits = net.forward_masked(&x, whole.then_some(lengths.as_slice()), true)?;
        let loss = candle_nn::loss::cross_entropy(&logits, &y)?;
        opt.backward_step(&loss)?;
        let value = loss.to_scalar::<f32>()?;
        if !value.is_finite() {
            bail!(
                "the training loss is {value} at step {} of epoch {}: training diverged (try a lower --lr than {})",
                losses.len() - first + 1,
                epoch + 1,
                args.lr
            );
        }
        losses.push(value);
    }
    Ok(())
}

/// What [`evaluate`] needs besides the split it scores.
#[derive(Clone, Copy)]
struct Scorer<'a> {
    net: &'a Net,
    training: &'a Split,
    stats: &'a MelStats,
    batch: usize,
    workers: usize,
    device: &'a Device,
    crop: Option<usize>,
}

impl Scorer<'_> {
    /// [`evaluate`] on `split`.
    fn evaluate(&self, split: &Arc<Split>) -> Result<(f64, FileEvaluator)> {
        evaluate(self, split)
    }
}

/// Scores `testing` and logs the result (with the leak / no-leak view where a class is
/// `leak`); the file-level report.
fn test(scorer: &Scorer, testing: &Arc<Split>, log: &mut dyn Write) -> Result<FileReport> {
    let (seg_acc, files) = scorer.evaluate(testing)?;
    let report = files.report(&Decision::MeanProbability);
    if let Some(leak) = testing.label_names().iter().position(|n| n == "leak") {
        let binary = files.report(&Decision::MeanThreshold {
            positive: leak,
            threshold: 0.5,
        });
        writeln!(
            log,
            "testing: segment accuracy {seg_acc:.3}; leak / no leak at mean probability 0.5: accuracy {:.3}, confusion {:?} (rows: true no-leak, leak)",
            binary.accuracy(),
            binary.confusion
        )?;
    }
    writeln!(
        log,
        "file-level accuracy on testing: {:.3} ({} files)",
        report.accuracy(),
        report.files()
    )?;
    Ok(report)
}

/// Scoring whole clips: each clip whole (in duration buckets), or each file over all its
/// windows.
mod whole {
    use super::*;

    /// Scores every clip of `split` (whole clips): over all its windows of `--crop`
    /// frames every half window when the model was trained on crops (`crop`), else
    /// each clip whole, many per batch. Returns (window or clip accuracy, per-clip evaluator).
    pub(super) fn evaluate(
        net: &Net,
        split: &Arc<Split>,
        trained_on: &Split,
        stats: &MelStats,
        how: How,
        device: &Device,
    ) -> Result<(f64, FileEvaluator)> {
        let How {
            batch,
            workers,
            crop,
        } = how;
        let mut files = FileEvaluator::for_split(split, trained_on)?;
        let index = split.whole().expect("whole clips");
        let labels: Vec<i64> = index
            .first_rows()
            .iter()
            .map(|&r| split.labels()[r])
            .collect();
        let mut score = Score::default();
        match crop {
            Some(crop) => {
                let windows = Windows::new(split, stats, crop);
                let mut pending = Pending::default();
                for clip in 0..index.clips() {
                    windows.of_clip(clip, &mut pending)?;
                    if pending.items() >= batch.min(4096) || clip + 1 == index.clips() {
                        pending.score(net, device, &labels, &mut files, &mut score)?;
                    }
                }
            }
            None => {
                let longest = index.all_frames().iter().copied().max().unwrap_or(1);
                let loader = Loader::new(
                    split.clone(),
                    LoaderOptions {
                        unit: Unit::Clip,
                        batch_size: 256,
                        max_frames: Some(longest.max(batch)),
                        shuffle: Shuffle::None,
                        normalize: Some(stats.clone()),
                        workers,
                        prefetch: 2,
                        ..LoaderOptions::default()
                    },
                )?;
                for b in loader.epoch(0) {
                    let b = b?;
                    let clips: Vec<usize> = b.ids().iter().map(|id| id.clip).collect();
                    let lengths = b.lengths().to_vec();
                    let (x, _) = b.into_tensors(device, TensorFloat::F32)?;
                    let logits = net.forward_masked(&x, Some(&lengths), false)?;
                    score.add(&logits, &clips, &labels, &mut files)?;
                }
            }
        }
        Ok((score.accuracy(), files))
    }

    /// How whole clips are scored: items per batch, loader threads, and the crop the
    /// model was trained on (`None`: each clip whole).
    #[derive(Debug, Clone, Copy)]
    pub(super) struct How {
        pub batch: usize,
        pub workers: usize,
        pub crop: Option<usize>,
    }

    /// Right and scored items.
    #[derive(Default)]
    struct Score {
        right: usize,
        total: usize,
    }

    impl Score {
        fn add(
            &mut self,
            logits: &Tensor,
            clips: &[usize],
            labels: &[i64],
            files: &mut FileEvaluator,
        ) -> Result<()> {
            let probs = candle_nn::ops::softmax(logits, D::Minus1)?;
            let guess: Vec<u32> = probs.argmax(D::Minus1)?.to_vec1()?;
            self.right += guess
                .iter()
                .zip(clips)
                .filter(|(g, c)| **g as i64 == labels[**c])
                .count();
            self.total += clips.len();
            files.add(&probs.flatten_all()?.to_vec1::<f32>()?, clips)?;
            Ok(())
        }

        fn accuracy(&self) -> f64 {
            self.right as f64 / self.total.max(1) as f64
        }
    }

    /// The windows of each clip, normalised: `crop` frames every `crop / 2`, the last one
    /// ending at the clip's end (a clip shorter than a window: one, zero-padded).
    struct Windows<'a> {
        split: &'a Split,
        mean: Vec<f32>,
        scale: Vec<f32>,
        crop: usize,
    }

    impl<'a> Windows<'a> {
        fn new(split: &'a Split, stats: &MelStats, crop: usize) -> Self {
            let (mean, scale) = stats.affine();
            Windows {
                split,
                mean,
                scale,
                crop,
            }
        }

        fn of_clip(&self, clip: usize, into: &mut Pending) -> Result<()> {
            let x = self.split.whole_clip(clip)?;
            let (m, t) = x.dim();
            let c = self.crop;
            let mut starts: Vec<usize> = (0..t.saturating_sub(c) + 1)
                .step_by((c / 2).max(1))
                .collect();
            if t > c && starts.last() != Some(&(t - c)) {
                starts.push(t - c);
            }
            for s in starts {
                let n = c.min(t - s);
                for b in 0..m {
                    for j in 0..c {
                        let v = if j < n {
                            (x[[b, s + j]] - self.mean[b]) * self.scale[b]
                        } else {
                            0.0
                        };
                        into.values.push(v);
                    }
                }
                into.lengths.push(n);
                into.clips.push(clip);
            }
            into.shape = (m, c);
            Ok(())
        }
    }

    /// Windows waiting to be scored together.
    #[derive(Default)]
    struct Pending {
        values: Vec<f32>,
        lengths: Vec<usize>,
        clips: Vec<usize>,
        shape: (usize, usize),
    }

    impl Pending {
        fn items(&self) -> usize {
            self.clips.len()
        }

        fn score(
            &mut self,
            net: &Net,
            device: &Device,
            labels: &[i64],
            files: &mut FileEvaluator,
            score: &mut Score,
        ) -> Result<()> {
            if self.clips.is_empty() {
                return Ok(());
            }
            let (m, c) = self.shape;
            let x = Tensor::from_vec(
                std::mem::take(&mut self.values),
                (self.clips.len(), m, c),
                device,
            )?;
            let logits = net.forward_masked(&x, Some(&self.lengths), false)?;
            score.add(&logits, &self.clips, labels, files)?;
            self.lengths.clear();
            self.clips.clear();
            Ok(())
        }
    }
}

fn main() -> Result<()> {
    melread::sigbus::exit_on_sigbus(melread::sigbus::DEFAULT_MESSAGE, 74);
    let args = Args::parse();
    run(&args, &mut std::io::stdout().lock())?;
    Ok(())
}
