//! `melctl show OUT/SPLIT.h5 --index I --png OUT.png`: a clip's spectrogram as a picture
//! (plotters): its segments laid out in time order (or one, `--segment L,S`), mel bands
//! with their centre frequencies, a dB colour bar, and the clip's path and label in the
//! title. `--class-means` draws each class's mean spectrogram side by side instead.

use std::path::Path;

use anyhow::{Context, Result, bail};
use hdf5::types::VarLenUnicode;
use mel_core::Config;
use mel_core::dsp::{hz_to_mel, mel_to_hz};
use plotters::prelude::*;

/// One output's clips, widened to f32.
struct Output {
    /// `[clips, ...clip shape]`.
    shape: Vec<usize>,
    labels: Vec<i64>,
    paths: Vec<String>,
    label_names: Vec<String>,
    config: Config,
    /// Clip `i`'s values, widened to f32.
    read: Box<dyn Fn(usize) -> Result<Vec<f32>>>,
}

/// Most classes `--class-means` draws side by side.
const MAX_PANELS: usize = 16;

fn open(path: &Path) -> Result<Output> {
    let out = if path.is_dir() {
        open_npy(path)?
    } else {
        open_h5(path)?
    };
    // The file is data, not a promise: its shape and labels are checked before use.
    let clip_values = out
        .shape
        .get(1..)
        .map_or(0, |s| s.iter().product::<usize>());
    if out.shape.len() < 3 || clip_values == 0 {
        bail!(
            "{}: `mel` has shape {:?}; expected [clips, ..., mels, frames]",
            path.display(),
            out.shape
        );
    }
    if clip_values > mel_core::plan::MAX_VALUES_PER_CLIP {
        bail!(
            "{}: a clip of shape {:?} holds {clip_values} values; the limit is {}",
            path.display(),
            &out.shape[1..],
            mel_core::plan::MAX_VALUES_PER_CLIP
        );
    }
    if out.labels.len() != out.shape[0] {
        bail!(
            "{}: {} labels for {} clips",
            path.display(),
            out.labels.len(),
            out.shape[0]
        );
    }
    Ok(out)
}

/// The configuration an output records (its `config` attribute or key, JSON).
fn config_of(json: &str) -> Result<Config> {
    serde_json::from_str(json).context("the stored configuration does not parse")
}

fn open_h5(path: &Path) -> Result<Output> {
    let file = hdf5::File::open(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot open {} as HDF5: {}",
            path.display(),
            crate::inspect::one_line(&e.to_string())
        )
    })?;
    let mel = file
        .dataset("mel")
        .context("no `mel` dataset: not a melctl file?")?;
    let shape = mel.shape();
    let labels: Vec<i64> = file.dataset("label")?.read_raw()?;
    let paths: Vec<VarLenUnicode> = file.dataset("path")?.read_raw()?;
    let names: Vec<VarLenUnicode> = file.attr("label_names")?.read_raw()?;
    let config: VarLenUnicode = file.attr("config")?.read_scalar()?;
    let dtype = mel
        .attr("dtype")
        .and_then(|a| a.read_scalar::<VarLenUnicode>())
        .map(|v| v.to_string())
        .unwrap_or_default();
    let ndim = shape.len();
    let read = move |i: usize| -> Result<Vec<f32>> {
        let mut slab = vec![hdf5::SliceOrIndex::from(i..i + 1)];
        slab.extend((1..ndim).map(|_| hdf5::SliceOrIndex::from(..)));
        let slab = hdf5::Hyperslab::from(slab);
        Ok(match dtype.as_str() {
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
        })
    };
    Ok(Output {
        shape,
        labels,
        paths: paths.iter().map(|p| p.to_string()).collect(),
        label_names: names.iter().map(|n| n.to_string()).collect(),
        config: config_of(config.as_str())?,
        read: Box::new(read),
    })
}

fn open_npy(dir: &Path) -> Result<Output> {
    let s = crate::inspect::summarize(dir, 0)?;
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("meta.json"))?)?;
    let paths = meta["paths"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let labels = {
        let b = std::fs::read(dir.join("label.npy"))?;
        let len = b.get(8..10).context("label.npy is truncated")?;
        let at = 10 + u16::from_le_bytes([len[0], len[1]]) as usize;
        b.get(at..)
            .context("label.npy is truncated")?
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    };
    let per: usize = s.shape[1..].iter().product();
    let (dtype, mel) = (s.dtype.clone(), dir.join("mel.npy"));
    let read = move |i: usize| -> Result<Vec<f32>> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open(&mel)?;
        let mut head = [0u8; 10];
        f.read_exact_at(&mut head, 0)?;
        let at = 10 + u16::from_le_bytes([head[8], head[9]]) as u64;
        let width = if dtype == "f32" { 4 } else { 2 };
        let mut raw = vec![0u8; per * width];
        f.read_exact_at(&mut raw, at + (i * per * width) as u64)?;
        Ok(match dtype.as_str() {
            "f32" => raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect(),
            "bf16" => raw
                .chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            _ => raw
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
        })
    };
    Ok(Output {
        shape: s.shape,
        labels,
        paths,
        label_names: s.classes.into_iter().map(|(n, _)| n).collect(),
        config: config_of(&s.config.to_string())?,
        read: Box::new(read),
    })
}

/// A clip's values as an image `[n_mels][columns]`: its segments' frames side by side in
/// time order (`[long][short]` is already time order), or the one segment asked for.
fn image(
    values: &[f32],
    clip_shape: &[usize],
    segment: Option<(usize, usize)>,
) -> Result<Vec<Vec<f32>>> {
    let (n_mels, frames) = (
        clip_shape[clip_shape.len() - 2],
        clip_shape[clip_shape.len() - 1],
    );
    let per_segment = n_mels * frames;
    let segments = values.len() / per_segment;
    let chosen: Vec<usize> = match segment {
        None => (0..segments).collect(),
        Some((l, s)) => {
            let lead = &clip_shape[..clip_shape.len() - 2];
            let (longs, shorts) = match lead {
                [l, s] => (*l, *s),
                [s] => (1, *s),
                _ => (1, 1),
            };
            if l >= longs || s >= shorts {
                bail!("--segment {l},{s}: the clip has {longs} long × {shorts} short windows");
            }
            vec![l * shorts + s]
        }
    };
    Ok((0..n_mels)
        .map(|m| {
            chosen
                .iter()
                .flat_map(|&seg| {
                    let at = seg * per_segment + m * frames;
                    values[at..at + frames].iter().copied()
                })
                .collect()
        })
        .collect())
}

/// A perceptually ordered colour for `t` in 0..=1 (dark blue → green → yellow).
fn colour(t: f64) -> RGBColor {
    let stops = [
        (0.0, (48, 18, 59)),
        (0.25, (33, 102, 172)),
        (0.5, (32, 163, 134)),
        (0.75, (170, 210, 60)),
        (1.0, (250, 235, 40)),
    ];
    let t = t.clamp(0.0, 1.0);
    let k = stops
        .iter()
        .rposition(|(p, _)| *p <= t)
        .unwrap_or(0)
        .min(stops.len() - 2);
    let ((p0, c0), (p1, c1)) = (stops[k], stops[k + 1]);
    let f = (t - p0) / (p1 - p0);
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    RGBColor(mix(c0.0, c1.0), mix(c0.1, c1.1), mix(c0.2, c1.2))
}

/// The first sans-serif TrueType font found on this machine, registered with plotters.
fn register_font() -> Result<()> {
    let candidates = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
        "/usr/share/fonts/noto/NotoSans-Regular.ttf",
        "/System/Library/Fonts/Supplemental/Arial.ttf",
    ];
    let font = candidates
        .iter()
        .find_map(|p| std::fs::read(p).ok())
        .context(
            "no font for the labels: install one (Debian: apt-get install fonts-dejavu-core)",
        )?;
    plotters::style::register_font(
        "sans-serif",
        FontStyle::Normal,
        Box::leak(font.into_boxed_slice()),
    )
    .map_err(|_| anyhow::anyhow!("the font found is not usable"))
}

/// Centre frequency (Hz) of each mel band of `config`.
fn band_centres(config: &Config) -> Vec<f64> {
    let m = &config.mel;
    let scale = m.mel_scale;
    let lo = hz_to_mel(m.f_min, scale);
    let hi = hz_to_mel(m.f_max(config.audio.sample_rate), scale);
    let step = (hi - lo) / (m.n_mels + 1) as f64;
    (1..=m.n_mels)
        .map(|k| mel_to_hz(lo + step * k as f64, scale))
        .collect()
}

/// Draws panels (title, image) side by side into `png`, with one colour bar.
fn draw(
    png: &Path,
    title: &str,
    panels: &[(String, Vec<Vec<f32>>)],
    config: &Config,
    x_desc: &str,
) -> Result<()> {
    register_font()?;
    let (lo, hi) = panels
        .iter()
        .flat_map(|(_, img)| img.iter().flatten())
        .filter(|v| v.is_finite())
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    if !lo.is_finite() {
        bail!("nothing to draw: no finite values");
    }
    let span = (hi - lo).max(1e-6);
    let (width, height) = ((360 * panels.len().max(2) as u32 + 130).max(900), 520);
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (width, height)).into_drawing_area();
        plot(root, title, panels, config, x_desc, (lo, hi, span))?;
    }
    write_png(png, &pixels, width, height)
}

/// Encodes `pixels` (RGB) as a PNG at `png`, under a temporary name first.
fn write_png(png: &Path, pixels: &[u8], width: u32, height: u32) -> Result<()> {
    use image::ImageEncoder;
    let fail = || format!("cannot write {}", png.display());
    let (staged, file) = mel_core::atomic::Staged::file(png).with_context(fail)?;
    let mut out = std::io::BufWriter::new(file);
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(pixels, width, height, image::ColorType::Rgb8)
        .with_context(fail)?;
    out.into_inner()
        .map_err(|e| e.into_error())
        .with_context(fail)?;
    staged.commit(false).with_context(fail)?;
    Ok(())
}

/// Draws the panels and the colour bar (values `lo..hi`, `span` wide) on `root`.
fn plot(
    root: DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    title: &str,
    panels: &[(String, Vec<Vec<f32>>)],
    config: &Config,
    x_desc: &str,
    (lo, hi, span): (f32, f32, f32),
) -> Result<()> {
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 18))?;
    let (main, bar) = root.split_horizontally(root.dim_in_pixel().0 - 110);
    let centres = band_centres(config);
    let areas = main.split_evenly((1, panels.len()));
    for ((name, img), area) in panels.iter().zip(areas) {
        let (rows, cols) = (img.len(), img.first().map_or(0, Vec::len));
        let mut chart = ChartBuilder::on(&area)
            .caption(name, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..cols as f64, 0f64..rows as f64)?;
        let c = centres.clone();
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(x_desc)
            .y_desc("mel band centre (Hz)")
            .y_label_formatter(&move |y| {
                c.get(*y as usize)
                    .map_or(String::new(), |hz| format!("{hz:.0}"))
            })
            .label_style(("sans-serif", 12))
            .draw()?;
        chart.draw_series(img.iter().enumerate().flat_map(|(m, row)| {
            row.iter().enumerate().map(move |(x, &v)| {
                let t = ((v - lo) / span) as f64;
                Rectangle::new(
                    [(x as f64, m as f64), (x as f64 + 1.0, m as f64 + 1.0)],
                    colour(t).filled(),
                )
            })
        }))?;
    }
    // The colour bar, in dB (or the stored unit).
    let mut cb = ChartBuilder::on(&bar)
        .margin_top(40)
        .margin_bottom(48)
        .margin_right(8)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..1f64, lo as f64..hi as f64)?;
    cb.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_desc("dB")
        .label_style(("sans-serif", 12))
        .draw()?;
    let steps = 100;
    cb.draw_series((0..steps).map(|k| {
        let a = lo as f64 + span as f64 * k as f64 / steps as f64;
        let b = lo as f64 + span as f64 * (k + 1) as f64 / steps as f64;
        Rectangle::new(
            [(0.0, a), (1.0, b)],
            colour(k as f64 / steps as f64).filled(),
        )
    }))?;
    root.present()?;
    Ok(())
}

/// `melctl show`.
pub fn show(
    file: &Path,
    index: usize,
    png: &Path,
    segment: Option<(usize, usize)>,
    class_means: bool,
) -> Result<()> {
    let out = open(file)?;
    let clips = out.shape[0];
    let clip_shape = &out.shape[1..];
    let segmented = clip_shape.len() > 2;
    let x_desc = if segment.is_some() || !segmented {
        "frame"
    } else {
        "frames of the clip's segments, in time order"
    };
    if class_means {
        if out.label_names.len() > MAX_PANELS {
            eprintln!(
                "{} classes: drawing the first {MAX_PANELS}",
                out.label_names.len()
            );
        }
        let mut panels = Vec::new();
        for (class, name) in out.label_names.iter().enumerate().take(MAX_PANELS) {
            let members: Vec<usize> = (0..clips)
                .filter(|&i| out.labels[i] == class as i64)
                .collect();
            if members.is_empty() {
                continue;
            }
            let mut sum: Option<Vec<Vec<f32>>> = None;
            for &i in &members {
                let img = image(&(out.read)(i)?, clip_shape, segment)?;
                match &mut sum {
                    None => sum = Some(img),
                    Some(s) => s
                        .iter_mut()
                        .flatten()
                        .zip(img.iter().flatten())
                        .for_each(|(a, b)| *a += b),
                }
            }
            let mut mean = sum.expect("at least one member");
            mean.iter_mut()
                .flatten()
                .for_each(|v| *v /= members.len() as f32);
            panels.push((format!("{name} (mean of {})", members.len()), mean));
        }
        if panels.is_empty() {
            bail!("{}: no clip has a label among its classes", file.display());
        }
        let title = format!("{}: class means", file.display());
        return draw(png, &title, &panels, &out.config, x_desc);
    }
    if index >= clips {
        bail!(
            "--index {index}: {} holds {clips} clips (0..{})",
            file.display(),
            clips.saturating_sub(1)
        );
    }
    let img = image(&(out.read)(index)?, clip_shape, segment)?;
    let label = out
        .label_names
        .get(out.labels[index] as usize)
        .cloned()
        .unwrap_or_default();
    let which = segment.map_or(String::new(), |(l, s)| format!(", segment ({l}, {s})"));
    let title = format!("{} (label {label}{which})", out.paths[index]);
    draw(
        png,
        &title,
        &[(format!("clip {index}"), img)],
        &out.config,
        x_desc,
    )
}
