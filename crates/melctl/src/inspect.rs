//! `melctl inspect OUT/SPLIT.h5 | OUT/SPLIT.npy.d`: what a trainer will find in an output,
//! as text or JSON.

use std::fmt::Write;
use std::path::Path;

use anyhow::Result;

/// What an output holds.
#[derive(Debug, serde::Serialize)]
pub struct Summary {
    /// The file or folder.
    pub path: String,
    /// `hdf5` or `npy`.
    pub format: &'static str,
    /// The split's name.
    pub split: String,
    /// Shape of `mel`.
    pub shape: Vec<usize>,
    /// Stored dtype (`f32`, `f16`, `bf16`).
    pub dtype: String,
    /// Axis names.
    pub dims: String,
    /// Chunk shape, when chunked.
    pub chunks: Option<Vec<usize>>,
    /// Whole clips (`audio.length = "whole"`): how many, and their lengths.
    pub whole: Option<WholeClips>,
    /// Windows (`audio.windows`): files cut, and the windows' length and hop in seconds.
    pub windows: Option<(usize, f64, f64)>,
    /// (class, clips) in label order.
    pub classes: Vec<(String, usize)>,
    /// Each metadata column: its name, distinct values and the first few.
    pub metadata: Vec<Column>,
    /// Value statistics over the first clips.
    pub values: Option<Values>,
    /// Stored per-mel-bin means and standard deviations, when present.
    pub mel_mean: Option<Vec<f64>>,
    /// See `mel_mean`.
    pub mel_std: Option<Vec<f64>>,
    /// melctl's version that wrote it.
    pub version: String,
    /// The resolved configuration (JSON).
    pub config: serde_json::Value,
}

/// The whole clips of a split in brief.
#[derive(Debug, serde::Serialize)]
pub struct WholeClips {
    /// Clips (runs of rows).
    pub clips: usize,
    /// Frames of the shortest clip.
    pub min_frames: usize,
    /// The median clip's frames.
    pub median_frames: usize,
    /// Frames of the longest clip.
    pub max_frames: usize,
    /// Frames of every clip together.
    pub total_frames: u64,
    /// Frames per stored row (block).
    pub block_frames: usize,
}

impl WholeClips {
    fn of(index: &melkit::read::WholeIndex) -> WholeClips {
        let mut frames = index.all_frames().to_vec();
        frames.sort_unstable();
        WholeClips {
            clips: frames.len(),
            min_frames: frames.first().copied().unwrap_or(0),
            median_frames: frames.get(frames.len() / 2).copied().unwrap_or(0),
            max_frames: frames.last().copied().unwrap_or(0),
            total_frames: frames.iter().map(|&f| f as u64).sum(),
            block_frames: index.block_frames(),
        }
    }
}

/// A metadata column in brief.
#[derive(Debug, serde::Serialize)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// Distinct values over the split.
    pub distinct: usize,
    /// The first distinct values, in clip order (at most [`EXAMPLES`]).
    pub examples: Vec<String>,
}

/// Distinct values a column's summary shows.
const EXAMPLES: usize = 4;

/// Characters of each value shown.
const EXAMPLE_CHARS: usize = 40;

impl Column {
    fn of(name: &str, values: &[String]) -> Column {
        let mut seen = std::collections::HashSet::new();
        let mut examples = Vec::new();
        for v in values {
            if seen.insert(v.as_str()) && examples.len() < EXAMPLES {
                // A value may be 1 KiB: an example shows its start.
                let mut shown: String = v.chars().take(EXAMPLE_CHARS).collect();
                if shown.len() < v.len() {
                    shown.push('…');
                }
                examples.push(shown);
            }
        }
        Column {
            name: name.to_string(),
            distinct: seen.len(),
            examples,
        }
    }
}

/// Statistics of the sampled values.
#[derive(Debug, serde::Serialize)]
pub struct Values {
    /// Clips sampled.
    pub clips: usize,
    /// Smallest value.
    pub min: f32,
    /// Largest value.
    pub max: f32,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub std: f64,
    /// NaN or infinite values.
    pub non_finite: usize,
}

/// Value statistics accumulated clip by clip (Chan's merge of per-clip moments), so
/// sampling never holds more than one clip.
#[derive(Default)]
struct Sampled {
    clips: usize,
    count: u64,
    min: f32,
    max: f32,
    mean: f64,
    m2: f64,
    non_finite: usize,
}

impl Sampled {
    fn add(&mut self, v: &[f32]) {
        if v.is_empty() {
            return;
        }
        let (min, max) = v
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let m2 = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>();
        if self.count == 0 {
            (self.min, self.max) = (min, max);
        } else {
            (self.min, self.max) = (self.min.min(min), self.max.max(max));
        }
        let total = self.count as f64 + n;
        let delta = mean - self.mean;
        self.m2 += m2 + delta * delta * self.count as f64 * n / total;
        self.mean += delta * n / total;
        self.count += v.len() as u64;
        self.clips += 1;
        self.non_finite += v.iter().filter(|x| !x.is_finite()).count();
    }

    fn finish(self) -> Option<Values> {
        (self.count > 0).then(|| Values {
            clips: self.clips,
            min: self.min,
            max: self.max,
            mean: self.mean,
            std: (self.m2 / self.count as f64).sqrt(),
            non_finite: self.non_finite,
        })
    }
}

fn class_counts(names: &[String], labels: &[i64]) -> Vec<(String, usize)> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), labels.iter().filter(|&&l| l == i as i64).count()))
        .collect()
}

/// Reads what `path` (an HDF5 file or an npy folder) holds, sampling `sample` clips.
/// The output is opened through melread, which checks every size it reads against the
/// file before allocating, so a damaged or hostile file is an error, never an abort.
pub fn summarize(path: &Path, sample: usize) -> Result<Summary> {
    let split = melkit::read::Split::open(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {} as a melctl output: {}",
            path.display(),
            melkit::core::error::one_line(&e.to_string())
        )
    })?;
    // One clip in memory at a time (melread bounds a clip's size).
    let mut sampled = Sampled::default();
    let mut reader = split.reader();
    let mut clip = vec![0.0f32; split.values_per_clip()];
    let whole = split.whole();
    match whole {
        Some(w) => {
            for i in 0..w.clips().min(sample) {
                let n = w.frames(i);
                clip.resize(split.n_mels() * n, 0.0);
                reader.read_whole_window(i, (0, n), &mut clip, None)?;
                sampled.add(&clip);
            }
        }
        None => {
            for i in 0..split.clips().min(sample) {
                reader.read_clip(i, &mut clip, None)?;
                sampled.add(&clip);
            }
        }
    }
    // Whole clips: a clip's label and metadata are its first row's.
    let per_clip = |rows: &[String]| -> Vec<String> {
        match whole {
            Some(w) => w.first_rows().iter().map(|&r| rows[r].clone()).collect(),
            None => rows.to_vec(),
        }
    };
    let labels: Vec<i64> = match whole {
        Some(w) => w.first_rows().iter().map(|&r| split.labels()[r]).collect(),
        None => split.labels().to_vec(),
    };
    let chunks = match split.access() {
        melkit::read::Access::Chunks {
            clips_per_chunk, ..
        } => Some(
            std::iter::once(*clips_per_chunk)
                .chain(split.clip_shape().iter().copied())
                .collect(),
        ),
        _ => None,
    };
    let stats = split.stored_stats();
    Ok(Summary {
        path: path.display().to_string(),
        format: match split.format() {
            melkit::read::Format::Hdf5 => "hdf5",
            melkit::read::Format::Npy => "npy",
        },
        split: split.name().to_string(),
        shape: split.shape().to_vec(),
        dtype: split.dtype().name().to_string(),
        dims: split.dims().join(","),
        chunks,
        whole: whole.map(WholeClips::of),
        windows: split.windows().map(|w| {
            let rate = f64::from(
                split
                    .config()
                    .and_then(|c| c["audio"]["sample_rate"].as_u64())
                    .unwrap_or(1) as u32,
            );
            let g = w.windowing();
            (w.files(), g.window as f64 / rate, g.hop as f64 / rate)
        }),
        classes: class_counts(split.label_names(), &labels),
        metadata: split
            .meta_columns()
            .iter()
            .map(|c| Column::of(c, &per_clip(split.metadata().column(c).unwrap_or_default())))
            .collect(),
        values: sampled.finish(),
        mel_mean: stats.map(|s| s.mean.clone()),
        mel_std: stats.map(|s| s.std.clone()),
        version: split.melctl_version().unwrap_or_default().to_string(),
        config: split.config().cloned().unwrap_or_default(),
    })
}

/// The summary as text.
pub fn text(s: &Summary) -> Result<String> {
    let mut t = String::new();
    writeln!(t, "file        {} ({})", s.path, s.format)?;
    writeln!(t, "split       {}", s.split)?;
    writeln!(
        t,
        "mel         {:?} {} ({}){}",
        s.shape,
        s.dtype,
        s.dims,
        s.chunks
            .as_ref()
            .map(|c| format!(", chunks {c:?}"))
            .unwrap_or_default()
    )?;
    writeln!(
        t,
        "label       [{}] int64",
        s.shape.first().copied().unwrap_or(0)
    )?;
    if let Some((files, seconds, hop)) = s.windows {
        writeln!(
            t,
            "windows     {} windows of {files} files: {seconds} s every {hop} s",
            s.shape.first().copied().unwrap_or(0)
        )?;
    }
    if let Some(w) = &s.whole {
        writeln!(
            t,
            "clips       {} whole clips of {} to {} frames (median {}, {} in all), in rows of {} frames",
            w.clips, w.min_frames, w.max_frames, w.median_frames, w.total_frames, w.block_frames
        )?;
    }
    writeln!(t, "classes     {}", s.classes.len())?;
    for (i, (n, c)) in s.classes.iter().enumerate() {
        writeln!(t, "  {i:>3} {n:<20} {c:>8} clips")?;
    }
    for c in &s.metadata {
        let more = if c.distinct > c.examples.len() {
            ", ..."
        } else {
            ""
        };
        writeln!(
            t,
            "metadata    {}: {} distinct ({}{more})",
            c.name,
            c.distinct,
            c.examples
                .iter()
                .map(|e| format!("{e:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    if let Some(v) = &s.values {
        writeln!(
            t,
            "values      first {} clips: min {:.3} max {:.3} mean {:.3} std {:.3} non-finite {}",
            v.clips, v.min, v.max, v.mean, v.std, v.non_finite
        )?;
    }
    if let (Some(m), Some(sd)) = (&s.mel_mean, &s.mel_std) {
        let range = |v: &[f64]| {
            v.iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                })
        };
        let (m0, m1) = range(m);
        let (s0, s1) = range(sd);
        writeln!(
            t,
            "statistics  per mel bin: mean {m0:.2} to {m1:.2}, std {s0:.2} to {s1:.2} (mel_mean, mel_std)"
        )?;
    }
    writeln!(t, "version     melctl {}", s.version)?;
    writeln!(t, "config      {}", s.config)?;
    Ok(t)
}
