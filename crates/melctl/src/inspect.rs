//! `melctl inspect FILE.h5`: what a trainer will find in the file.

use std::fmt::Write;
use std::path::Path;

use anyhow::{Context, Result};
use hdf5::types::VarLenUnicode;

/// Describes `path`: shapes, dtype, label counts, configuration and value statistics over `sample` clips.
pub fn inspect(path: &Path, sample: usize) -> Result<String> {
    let file = hdf5::File::open(path)
        .with_context(|| format!("cannot open {} as HDF5", path.display()))?;
    let mel = file
        .dataset("mel")
        .context("no `mel` dataset: not a melctl file?")?;
    let labels: Vec<i64> = file
        .dataset("label")
        .context("no `label` dataset")?
        .read_raw()?;
    let names: Vec<VarLenUnicode> = file.attr("label_names")?.read_raw()?;
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
    let mut s = String::new();
    writeln!(s, "file        {}", path.display())?;
    writeln!(s, "split       {}", text_attr("split"))?;
    writeln!(
        s,
        "mel         {:?} {} ({}), chunks {:?}",
        shape,
        dtype,
        text_attr("mel_dims"),
        mel.chunk()
    )?;
    writeln!(s, "label       [{}] int64", labels.len())?;
    writeln!(s, "classes     {}", names.len())?;
    for (i, n) in names.iter().enumerate() {
        let count = labels.iter().filter(|&&l| l == i as i64).count();
        writeln!(s, "  {i:>3} {:<20} {count:>8} clips", n.as_str())?;
    }
    let n = shape.first().copied().unwrap_or(0).min(sample);
    if n > 0 {
        let mut slab = vec![hdf5::SliceOrIndex::from(0..n)];
        slab.extend((1..shape.len()).map(|_| hdf5::SliceOrIndex::from(..)));
        let slab = hdf5::Hyperslab::from(slab);
        let values: Vec<f32> = match dtype.as_str() {
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
        let v = &values[..];
        let (min, max) = v
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64;
        let non_finite = v.iter().filter(|x| !x.is_finite()).count();
        writeln!(
            s,
            "values      first {n} clips: min {min:.3} max {max:.3} mean {mean:.3} std {:.3} non-finite {non_finite}",
            var.sqrt()
        )?;
    }
    writeln!(s, "version     melctl {}", text_attr("melctl_version"))?;
    writeln!(s, "config      {}", text_attr("config"))?;
    Ok(s)
}
