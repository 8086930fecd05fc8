//! `melctl inspect OUT/SPLIT.h5 | OUT/SPLIT.npy.d`: what a trainer will find in an output,
//! as text or JSON.

use std::fmt::Write;
use std::path::Path;

use anyhow::{Context, Result, bail};
use hdf5::types::VarLenUnicode;

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
    /// (class, clips) in label order.
    pub classes: Vec<(String, usize)>,
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

fn values(v: &[f32], clips: usize) -> Option<Values> {
    if v.is_empty() {
        return None;
    }
    let (min, max) = v
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64;
    Some(Values {
        clips,
        min,
        max,
        mean,
        std: var.sqrt(),
        non_finite: v.iter().filter(|x| !x.is_finite()).count(),
    })
}

fn class_counts(names: &[String], labels: &[i64]) -> Vec<(String, usize)> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), labels.iter().filter(|&&l| l == i as i64).count()))
        .collect()
}

/// Reads what `path` (an HDF5 file or an npy folder) holds, sampling `sample` clips.
pub fn summarize(path: &Path, sample: usize) -> Result<Summary> {
    if path.is_dir() {
        npy(path, sample)
    } else {
        h5(path, sample)
    }
}

fn h5(path: &Path, sample: usize) -> Result<Summary> {
    let file = hdf5::File::open(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot open {} as HDF5: {}",
            path.display(),
            one_line(&e.to_string())
        )
    })?;
    let mel = file
        .dataset("mel")
        .map_err(|_| anyhow::anyhow!("{}: no `mel` dataset: not a melctl file?", path.display()))?;
    let labels: Vec<i64> = file
        .dataset("label")
        .and_then(|d| d.read_raw())
        .map_err(|_| anyhow::anyhow!("{}: no readable `label` dataset", path.display()))?;
    let names: Vec<VarLenUnicode> = file
        .attr("label_names")
        .and_then(|a| a.read_raw())
        .map_err(|_| anyhow::anyhow!("{}: no `label_names` attribute", path.display()))?;
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let text_attr = |name: &str| -> String {
        file.attr(name)
            .and_then(|a| a.read_scalar::<VarLenUnicode>())
            .map(|v| v.to_string())
            .unwrap_or_default()
    };
    let shape = mel.shape();
    let dtype = mel
        .attr("dtype")
        .and_then(|a| a.read_scalar::<VarLenUnicode>())
        .map(|v| v.to_string())
        .unwrap_or_default();
    let dtype = if dtype.starts_with("bfloat16") {
        "bf16".to_string()
    } else {
        dtype
    };
    let n = shape.first().copied().unwrap_or(0).min(sample);
    let mut sampled = Vec::new();
    if n > 0 {
        let mut slab = vec![hdf5::SliceOrIndex::from(0..n)];
        slab.extend((1..shape.len()).map(|_| hdf5::SliceOrIndex::from(..)));
        let slab = hdf5::Hyperslab::from(slab);
        sampled = match dtype.as_str() {
            "f32" => mel
                .read_slice::<f32, _, ndarray::IxDyn>(slab)?
                .iter()
                .copied()
                .collect(),
            "f16" => mel
                .read_slice::<half::f16, _, ndarray::IxDyn>(slab)?
                .iter()
                .map(|v| v.to_f32())
                .collect(),
            _ => mel
                .read_slice::<u16, _, ndarray::IxDyn>(slab)?
                .iter()
                .map(|&b| half::bf16::from_bits(b).to_f32())
                .collect(),
        };
    }
    let stats = |name: &str| file.dataset(name).and_then(|d| d.read_raw::<f64>()).ok();
    Ok(Summary {
        path: path.display().to_string(),
        format: "hdf5",
        split: text_attr("split"),
        shape: shape.clone(),
        dtype,
        dims: text_attr("mel_dims"),
        chunks: mel.chunk(),
        classes: class_counts(&names, &labels),
        values: values(&sampled, n),
        mel_mean: stats("mel_mean"),
        mel_std: stats("mel_std"),
        version: text_attr("melctl_version"),
        config: serde_json::from_str(&text_attr("config")).unwrap_or_default(),
    })
}

/// The shape and data offset of an `.npy` file's header.
fn npy_header(bytes: &[u8]) -> Result<(String, Vec<usize>, usize)> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        bail!("not an .npy file");
    }
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(bytes.get(10..10 + len).context("truncated header")?)?;
    let descr = header
        .split("'descr': '")
        .nth(1)
        .and_then(|r| r.split('\'').next())
        .context("no descr")?
        .to_string();
    let shape: Vec<usize> = header
        .split("'shape': (")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .context("no shape")?
        .split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| x.trim().parse().context("a shape number"))
        .collect::<Result<_>>()?;
    Ok((descr, shape, 10 + len))
}

fn npy(dir: &Path, sample: usize) -> Result<Summary> {
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("meta.json")).with_context(|| {
            format!("{}: no meta.json: not a melctl npy folder?", dir.display())
        })?)
        .with_context(|| format!("{}: meta.json does not parse", dir.display()))?;
    let mel_path = dir.join("mel.npy");
    let mut f = std::fs::File::open(&mel_path)
        .with_context(|| format!("cannot open {}", mel_path.display()))?;
    let mut head = vec![0u8; 4096];
    use std::io::Read;
    let got = f.read(&mut head)?;
    let (descr, shape, data_at) = npy_header(&head[..got])
        .with_context(|| format!("{}: not a valid .npy", mel_path.display()))?;
    let per_clip: usize = shape[1..].iter().product();
    let n = shape.first().copied().unwrap_or(0).min(sample);
    let width = if descr == "<f4" { 4 } else { 2 };
    let mut raw = vec![0u8; n * per_clip * width];
    use std::os::unix::fs::FileExt;
    f.read_exact_at(&mut raw, data_at as u64)
        .with_context(|| format!("{}: shorter than its header says", mel_path.display()))?;
    let dtype = meta["dtype"].as_str().unwrap_or("").to_string();
    let sampled: Vec<f32> = match (descr.as_str(), dtype.as_str()) {
        ("<f4", _) => raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect(),
        (_, "bf16") => raw
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        _ => raw
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
    };
    let labels: Vec<i64> = {
        let b = std::fs::read(dir.join("label.npy"))?;
        let (_, _, at) = npy_header(&b)?;
        b[at..]
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    };
    let names: Vec<String> = meta["label_names"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let floats = |k: &str| -> Option<Vec<f64>> {
        meta[k]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
    };
    Ok(Summary {
        path: dir.display().to_string(),
        format: "npy",
        split: meta["split"].as_str().unwrap_or("").to_string(),
        shape,
        dtype,
        dims: meta["mel_dims"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default(),
        chunks: None,
        classes: class_counts(&names, &labels),
        values: values(&sampled, n),
        mel_mean: floats("mel_mean"),
        mel_std: floats("mel_std"),
        version: meta["melctl_version"].as_str().unwrap_or("").to_string(),
        config: meta["config"].clone(),
    })
}

/// A message that may span lines (HDF5's error stacks do) as one line.
pub fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
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
    writeln!(t, "classes     {}", s.classes.len())?;
    for (i, (n, c)) in s.classes.iter().enumerate() {
        writeln!(t, "  {i:>3} {n:<20} {c:>8} clips")?;
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
