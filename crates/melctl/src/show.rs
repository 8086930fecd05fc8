//! `melctl show OUT/SPLIT.h5 --index I --png OUT.png`: a clip's spectrogram as a picture
//! (plotters): its segments laid out in time order (or one, `--segment L,S`), mel bands
//! with their centre frequencies, a dB colour bar, and the clip's path and label in the
//! title. `--class-means` draws each class's mean spectrogram side by side instead.

use std::path::Path;

use anyhow::{Context, Result, bail};
use melkit::core::Config;
use melkit::core::dsp::{hz_to_mel, mel_to_hz};
use plotters::prelude::*;

/// Most classes `--class-means` draws (a grid of [`PANELS_PER_ROW`] a row).
const MAX_PANELS: usize = 16;

/// Most columns a panel draws; wider images are averaged down to this many.
const MAX_COLUMNS: usize = 2400;

/// An output opened through melread, which checks every size against the file before it
/// allocates (shapes, labels, paths, element type from the data itself).
struct Output {
    split: melkit::read::Split,
    /// The stored configuration, if this melctl can read it (only the axis labels use it).
    config: Option<Config>,
}

fn open(path: &Path) -> Result<Output> {
    let split = melkit::read::Split::open(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {} as a melctl output: {}",
            path.display(),
            melkit::core::error::one_line(&e.to_string())
        )
    })?;
    if split.clip_shape().len() < 2 || split.clips() == 0 {
        bail!(
            "{}: `mel` has shape {:?}; expected [clips, ..., mels, frames] with clips",
            path.display(),
            split.shape()
        );
    }
    let config = split
        .config()
        .and_then(|v| serde_json::from_value::<Config>(v.clone()).ok());
    if config.is_none() {
        errln!(
            "note: {}'s stored configuration is not one this melctl reads; the mel axis shows band numbers",
            path.display()
        );
    }
    Ok(Output { split, config })
}

impl Output {
    /// Clip `i`'s values, widened to f32, in stored order.
    fn clip(&self, i: usize) -> Result<Vec<f32>> {
        if self.split.whole().is_some() {
            return Ok(self.split.whole_clip(i)?.iter().copied().collect());
        }
        Ok(self.split.clip(i)?.iter().copied().collect())
    }

    /// Clip `i`'s shape: the split's, or a whole clip's own `[n_mels, frames]`.
    fn clip_shape(&self, i: usize) -> Vec<usize> {
        match self.split.whole() {
            Some(w) => vec![self.split.n_mels(), w.frames(i)],
            None => self.split.clip_shape().to_vec(),
        }
    }

    /// The row holding clip `i`'s label and path (its first block for whole clips).
    fn row(&self, i: usize) -> usize {
        self.split.whole().map_or(i, |w| w.first_rows()[i])
    }
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

/// Centre frequency (Hz) of each of the `n_mels` bands (from the data) under `config`.
fn band_centres(config: &Config, n_mels: usize) -> Vec<f64> {
    let m = &config.mel;
    let scale = m.mel_scale;
    let lo = hz_to_mel(m.f_min, scale);
    let hi = hz_to_mel(m.f_max(config.audio.sample_rate), scale);
    let step = (hi - lo) / (n_mels + 1) as f64;
    (1..=n_mels)
        .map(|k| mel_to_hz(lo + step * k as f64, scale))
        .collect()
}

/// The unit of the stored values, for the colour bar.
fn unit(config: Option<&Config>) -> &'static str {
    match config.map(|c| &c.log) {
        Some(melkit::core::LogScale::Db { .. }) => "dB",
        Some(melkit::core::LogScale::Ln { .. }) => "ln(energy)",
        Some(melkit::core::LogScale::None) => "energy",
        None => "value",
    }
}

/// How the panels' axes are labelled.
struct Axes {
    /// Centre frequency of each mel band, when the configuration is known.
    centres: Option<Vec<f64>>,
    /// The colour bar's unit.
    unit: &'static str,
    /// What the x axis counts.
    x_desc: &'static str,
    /// Frames per drawn column (more than 1 when a wide image was averaged down).
    x_scale: f64,
    /// Seconds per frame (the hop), when the x axis is time: one segment, or a clip
    /// that is not segmented (segments overlap, so their frames side by side are not).
    seconds_per_frame: Option<f64>,
}

impl Axes {
    /// The x axis' extent for `cols` drawn columns, in its unit.
    fn x_extent(&self, cols: usize) -> f64 {
        cols as f64 * self.x_scale * self.seconds_per_frame.unwrap_or(1.0)
    }

    /// Drawn column `x`'s left edge, in the x axis' unit.
    fn x_at(&self, x: usize) -> f64 {
        x as f64 * self.x_scale * self.seconds_per_frame.unwrap_or(1.0)
    }
}

/// Most panels a row of `--class-means` holds; more classes wrap to further rows.
const PANELS_PER_ROW: usize = 4;

/// A tick value as people write it: whole numbers without a fraction (`200`, not
/// `200.0`), others with as few decimals as their step needs.
fn tick(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil().clamp(0.0, 6.0) as usize
    };
    let text = format!("{v:.decimals$}");
    // "-0" is zero.
    if text
        .trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        "0".into()
    } else {
        text
    }
}

/// `img` with its columns averaged down to at most [`MAX_COLUMNS`].
fn narrowed(img: Vec<Vec<f32>>) -> Vec<Vec<f32>> {
    let cols = img.first().map_or(0, Vec::len);
    if cols <= MAX_COLUMNS {
        return img;
    }
    let per = cols.div_ceil(MAX_COLUMNS);
    img.into_iter()
        .map(|row| {
            row.chunks(per)
                .map(|c| c.iter().sum::<f32>() / c.len() as f32)
                .collect()
        })
        .collect()
}

/// Audio samples drawn above the spectrogram (`melctl show AUDIO_FILE`).
struct Wave {
    /// The clip's samples as the build decodes them (mono, resampled, padded or trimmed).
    samples: Vec<f32>,
    /// Their rate in Hz.
    rate: u32,
}

/// Height of the waveform's strip, in pixels.
const WAVE_HEIGHT: u32 = 220;

/// Draws panels (title, image) side by side into `png`, with one colour bar, under the
/// waveform when there is one.
fn draw(
    png: &Path,
    title: &str,
    panels: &[(String, Vec<Vec<f32>>)],
    axes: &Axes,
    wave: Option<&Wave>,
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
    let (rows, per_row) = grid(panels.len());
    let width = (360 * per_row.max(2) as u32 + 130).max(900);
    let height = 80 + 440 * rows as u32 + wave.map_or(0, |_| WAVE_HEIGHT);
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 18))?;
        let root = match wave {
            Some(w) => {
                let (top, rest) = root.split_vertically(WAVE_HEIGHT);
                let (top, _) = top.split_horizontally(width - 110);
                draw_wave(&top, w)?;
                rest
            }
            None => root,
        };
        plot(root, panels, axes, (lo, hi, span))?;
    }
    write_png(png, &pixels, width, height)
}

/// Encodes `pixels` (RGB) as a PNG at `png` (`-`: standard output): under a temporary
/// name first, or straight into a FIFO or device.
fn write_png(png: &Path, pixels: &[u8], width: u32, height: u32) -> Result<()> {
    use image::ImageEncoder;
    let fail = || format!("cannot write {}", png.display());
    let mut bytes = Vec::new();
    image::codecs::png::PngEncoder::new(&mut bytes)
        .write_image(pixels, width, height, image::ColorType::Rgb8)
        .with_context(fail)?;
    if png == Path::new("-") {
        crate::term::write_bytes(&bytes);
        return Ok(());
    }
    melkit::core::atomic::write_file(png, &bytes, false).with_context(fail)
}

/// Refuses a picture path that is the output being read (or a file in it), or a file
/// of a kind a picture cannot replace, before anything is drawn.
fn check_picture_path(file: &Path, png: &Path) -> Result<()> {
    use melkit::core::outputs::{Guard, Output, Written};
    if png == Path::new("-") {
        return Ok(());
    }
    // A PNG is written only where a PNG goes: any other name (another folder's split, an
    // audio file, a record) would be replaced by a picture. Devices and FIFOs are
    // written to as they are.
    let is_png = png
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    let special = std::fs::metadata(png).is_ok_and(|m| !m.is_file() && !m.is_dir());
    if !is_png && !special {
        anyhow::bail!(
            "{}: the picture is a PNG, so its name must end in .png (or be - for standard output); nothing else is replaced by it",
            png.display()
        );
    }
    let mut guard = Guard::new();
    let what = "the output being shown";
    guard.input(file, what);
    if let Ok(entries) = std::fs::read_dir(file) {
        for e in entries.flatten() {
            guard.input(&e.path(), what);
        }
    }
    // The folder's build record and the splits it names are the dataset too: a picture
    // written over `melctl-build.json` or a sibling split broke every split with exit 0.
    if let Some(folder) = file.parent() {
        let record = melkit::core::record::path(folder);
        guard.input(&record, "the output folder's build record");
        if let Ok(Some(r)) = melkit::core::record::read(folder) {
            for e in r.splits.values() {
                guard.input(&folder.join(&e.output), "a split of the output folder");
            }
        }
    }
    guard.check(&[Output::new(png, "the picture", Written::Stream)])?;
    Ok(())
}

/// Whether panels are narrow enough (several to a row) to want fewer x ticks.
fn per_panel_narrow(n: usize) -> bool {
    n > 2
}

/// Rows and panels per row for `n` panels: one row up to [`PANELS_PER_ROW`], then as
/// few rows as that allows, filled evenly (5 panels: 3 + 2, not 4 + 1).
fn grid(n: usize) -> (usize, usize) {
    let rows = n.max(1).div_ceil(PANELS_PER_ROW);
    (rows, n.max(1).div_ceil(rows))
}

/// The waveform as a min/max envelope (at most ~2,000 columns), time in seconds.
fn draw_wave(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    w: &Wave,
) -> Result<()> {
    let seconds = w.samples.len() as f64 / f64::from(w.rate);
    let peak = w
        .samples
        .iter()
        .filter(|v| v.is_finite())
        .fold(0f32, |m, v| m.max(v.abs()))
        .max(1e-6) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(
            "the samples the build decodes (mono, resampled, padded or trimmed)",
            ("sans-serif", 14),
        )
        .margin(8)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..seconds.max(1e-6), -peak..peak)?;
    let (x_step, y_step) = (seconds / 10.0, peak / 2.0);
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("time (s)")
        .y_desc("amplitude")
        .x_label_formatter(&move |x| tick(*x, x_step))
        .y_label_formatter(&move |y| tick(*y, y_step))
        .y_labels(5)
        .label_style(("sans-serif", 12))
        .draw()?;
    let per_column = w.samples.len().div_ceil(2000).max(1);
    let colour = RGBColor(31, 119, 180);
    chart.draw_series(w.samples.chunks(per_column).enumerate().map(|(i, chunk)| {
        let (lo, hi) = chunk
            .iter()
            .filter(|v| v.is_finite())
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| {
                (a.min(v), b.max(v))
            });
        let t = (i * per_column) as f64 / f64::from(w.rate);
        let (lo, hi) = if lo.is_finite() {
            (lo as f64, hi as f64)
        } else {
            (0.0, 0.0)
        };
        PathElement::new(vec![(t, lo), (t, hi)], colour)
    }))?;
    Ok(())
}

/// Draws the panels and the colour bar (values `lo..hi`, `span` wide) on `root`.
fn plot(
    root: DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    panels: &[(String, Vec<Vec<f32>>)],
    axes: &Axes,
    (lo, hi, span): (f32, f32, f32),
) -> Result<()> {
    let (main, bar) = root.split_horizontally(root.dim_in_pixel().0 - 110);
    let areas = main.split_evenly(grid(panels.len()));
    for ((name, img), area) in panels.iter().zip(areas) {
        let (rows, cols) = (img.len(), img.first().map_or(0, Vec::len));
        let x_end = axes.x_extent(cols);
        let mut chart = ChartBuilder::on(&area)
            .caption(name, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..x_end, 0f64..rows as f64)?;
        let c = axes.centres.clone();
        let x_step = x_end / 10.0;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(if per_panel_narrow(panels.len()) {
                5
            } else {
                10
            })
            .x_label_formatter(&move |x| tick(*x, x_step))
            .x_desc(axes.x_desc)
            .y_desc(if c.is_some() {
                "mel band centre (Hz)"
            } else {
                "mel band"
            })
            .y_label_formatter(&move |y| match &c {
                Some(c) => c
                    .get(*y as usize)
                    .map_or(String::new(), |hz| format!("{hz:.0}")),
                None => format!("{y:.0}"),
            })
            .label_style(("sans-serif", 12))
            .draw()?;
        chart.draw_series(img.iter().enumerate().flat_map(|(m, row)| {
            row.iter().enumerate().map(move |(x, &v)| {
                let t = ((v - lo) / span) as f64;
                let (x0, x1) = (axes.x_at(x), axes.x_at(x + 1));
                Rectangle::new([(x0, m as f64), (x1, m as f64 + 1.0)], colour(t).filled())
            })
        }))?;
    }
    // The colour bar, in dB (or the stored unit).
    let mut cb = ChartBuilder::on(&bar)
        .caption(axes.unit, ("sans-serif", 12))
        .margin_top(24)
        .margin_bottom(48)
        .margin_right(8)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..1f64, lo as f64..hi as f64)?;
    let bar_step = span as f64 / 10.0;
    cb.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_label_formatter(&move |v| tick(*v, bar_step))
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

/// The axes of a clip's picture: mel band centres and time where the configuration is
/// known, frames of overlapping segments side by side otherwise.
fn axes_for(
    config: Option<&Config>,
    n_mels: usize,
    segmented: bool,
    segment: Option<(usize, usize)>,
) -> Axes {
    Axes {
        centres: config.map(|c| band_centres(c, n_mels)),
        unit: unit(config),
        x_desc: match (segment.is_some() || !segmented, config) {
            (true, Some(_)) if segment.is_some() => "time from the segment's start (s)",
            (true, Some(_)) => "time (s)",
            (true, None) => "frame",
            (false, _) => "frames of the segments, side by side in time order",
        },
        x_scale: 1.0,
        seconds_per_frame: match (segment.is_some() || !segmented, config) {
            (true, Some(c)) => Some(c.mel.hop_length() as f64 / f64::from(c.audio.sample_rate)),
            _ => None,
        },
    }
}

/// `melctl show`.
pub fn show(
    file: &Path,
    index: usize,
    png: &Path,
    segment: Option<(usize, usize)>,
    class_means: bool,
) -> Result<()> {
    check_picture_path(file, png)?;
    let out = open(file)?;
    let split = &out.split;
    let clips = split.whole().map_or(split.clips(), |w| w.clips());
    let clip_shape = split.clip_shape().to_vec();
    if class_means && split.whole().is_some() {
        bail!(
            "{}: its whole clips have different lengths, so they have no mean picture; draw one with --index",
            file.display()
        );
    }
    let segmented = clip_shape.len() > 2;
    let mut axes = axes_for(out.config.as_ref(), split.n_mels(), segmented, segment);
    let (title, panels) = if class_means {
        let names = split.label_names();
        if names.len() > MAX_PANELS {
            errln!("{} classes: drawing the first {MAX_PANELS}", names.len());
        }
        let mut panels = Vec::new();
        for (class, name) in names.iter().enumerate().take(MAX_PANELS) {
            let members: Vec<usize> = (0..clips)
                .filter(|&i| split.labels()[i] == class as i64)
                .collect();
            let mut sum: Option<Vec<Vec<f32>>> = None;
            for &i in &members {
                let img = image(&out.clip(i)?, &clip_shape, segment)?;
                match &mut sum {
                    None => sum = Some(img),
                    Some(s) => s
                        .iter_mut()
                        .flatten()
                        .zip(img.iter().flatten())
                        .for_each(|(a, b)| *a += b),
                }
            }
            if let Some(mut mean) = sum {
                mean.iter_mut()
                    .flatten()
                    .for_each(|v| *v /= members.len() as f32);
                panels.push((format!("{name} (mean of {})", members.len()), mean));
            }
        }
        if panels.is_empty() {
            bail!("{}: no clip has a label among its classes", file.display());
        }
        (format!("{}: class means", file.display()), panels)
    } else {
        if index >= clips {
            bail!(
                "--index {index}: {} holds {clips} clips (0..{})",
                file.display(),
                clips - 1
            );
        }
        let img = image(&out.clip(index)?, &out.clip_shape(index), segment)?;
        let row = out.row(index);
        let label = usize::try_from(split.labels()[row])
            .ok()
            .and_then(|l| split.label_names().get(l))
            .cloned()
            .unwrap_or_else(|| split.labels()[row].to_string());
        let which = segment.map_or(String::new(), |(l, s)| format!(", segment ({l}, {s})"));
        let path = split.paths().get(row).map_or("?", String::as_str);
        (
            format!("{path} (label {label}{which})"),
            vec![(format!("clip {index}"), img)],
        )
    };
    let cols = panels[0].1.first().map_or(0, Vec::len);
    let panels: Vec<_> = panels
        .into_iter()
        .map(|(name, img)| (name, narrowed(img)))
        .collect();
    let drawn = panels[0].1.first().map_or(0, Vec::len).max(1);
    axes.x_scale = cols as f64 / drawn as f64;
    // Overlapping segments drawn side by side: their frames are not a time axis; say so
    // where it is read.
    let title = if segmented && segment.is_none() {
        format!("{title}; segments overlap, so x counts frames, not time")
    } else {
        title
    };
    draw(png, &title, &panels, &axes, None)
}

/// Whether `path` is a melctl output (an `.h5` file or a folder: an npy split) rather
/// than an audio file.
pub fn is_output(path: &Path) -> bool {
    path.is_dir()
        || path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("h5"))
}

/// `melctl show AUDIO_FILE`: the file's samples as a build decodes them, above the
/// spectrogram a build with `config` would store for it (the same decoder, plan and
/// backend choice).
pub fn show_audio(
    file: &Path,
    png: &Path,
    segment: Option<(usize, usize)>,
    config: &Config,
) -> Result<()> {
    check_picture_path(file, png)?;
    let plan = melkit::core::MelPlan::from_config(config)?;
    let audio = plan.spec().audio.clone();
    let mut samples = vec![0f32; audio.clip_samples()];
    melkit::audio::decode_into(file, &audio, &mut samples)?;
    let request = melkit::BackendRequest {
        kind: config.run.backend,
        device: config.run.device.clone(),
        ..melkit::BackendRequest::default()
    };
    let mut extractor = melkit::Extractor::new(plan.spec(), &request)?;
    let features = extractor.clips(&samples)?;
    let clip = features.clip_f32(0);
    let clip_shape = clip.shape().to_vec();
    let values: Vec<f32> = clip.iter().copied().collect();
    let segmented = clip_shape.len() > 2;
    let mut axes = axes_for(Some(config), plan.n_mels(), segmented, segment);
    let full = image(&values, &clip_shape, segment)?;
    let columns = full.first().map_or(0, Vec::len);
    let img = narrowed(full);
    let drawn = img.first().map_or(0, Vec::len).max(1);
    axes.x_scale = columns as f64 / drawn as f64;
    let which = segment.map_or(String::new(), |(l, s)| format!(", segment ({l}, {s})"));
    let title = format!(
        "{} as a build stores it ({} backend{which})",
        crate::term::visible(&file.display().to_string()),
        extractor.choice().kind.name()
    );
    let caption = if segmented && segment.is_none() {
        "spectrogram; segments overlap, so x counts frames, not time"
    } else {
        "spectrogram"
    };
    let wave = Wave {
        samples,
        rate: audio.sample_rate,
    };
    draw(
        png,
        &title,
        &[(caption.to_string(), img)],
        &axes,
        Some(&wave),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dark pixels' columns of `text` drawn at x = 100 in a 40 px sans-serif font.
    fn ink_columns(text: &str) -> Vec<u32> {
        register_font().expect("a font (the setup installs fonts-dejavu-core)");
        let (w, h) = (300u32, 60u32);
        let mut px = vec![255u8; (w * h * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut px, (w, h)).into_drawing_area();
            root.fill(&WHITE).unwrap();
            root.draw(&Text::new(text, (100, 20), ("sans-serif", 40).into_font()))
                .unwrap();
            root.present().unwrap();
        }
        (0..w)
            .filter(|&x| (0..h).any(|y| px[((y * w + x) * 3) as usize] < 128))
            .collect()
    }

    #[test]
    fn glyphs_are_drawn_at_the_pen_plus_their_side_bearing() {
        // An "l" has a left side bearing (DejaVu Sans: 0.12 em, 5 px here); plotters 0.3.7
        // drew every glyph at the pen, so "cl" touched and "clip" read "dip".
        let l = ink_columns("l");
        assert!(l[0] >= 102, "the l's ink starts at x = {}", l[0]);
        // In "cl" a blank column parts the c from the l.
        let cl = ink_columns("cl");
        let gaps = cl.windows(2).filter(|w| w[1] > w[0] + 1).count();
        assert!(gaps >= 1, "c and l touch: ink columns {cl:?}");
    }

    #[test]
    fn ticks_read_as_people_write_them() {
        assert_eq!(tick(200.0, 20.0), "200");
        assert_eq!(tick(-10.0, 5.0), "-10");
        assert_eq!(tick(0.04, 0.016), "0.04");
        assert_eq!(tick(-0.0001, 0.5), "0");
        assert_eq!(grid(10), (3, 4));
        assert_eq!(grid(3), (1, 3));
        assert_eq!(grid(5), (2, 3));
        assert_eq!(grid(16), (4, 4));
    }
}
