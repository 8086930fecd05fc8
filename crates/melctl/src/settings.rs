//! Resolving the configuration: preset, then the TOML file, then flags, as one set of
//! [`Layers`] (the layering Python's keywords go through too).

use anyhow::Result;
use melkit::core::Config;
use melkit::core::config::{Base, Layers, Overrides};

use crate::cli::ConfigFlags;

/// The configuration the flags describe (not yet validated: see `MelPlan::new`), and the
/// overrides the flags made (to say errors in their words: [`Overrides::in_words`]).
/// The run options are checked here, before anything is sized by them: a worker pool of
/// `--threads 99999999` was started before the plan refused it.
pub fn resolve(flags: &ConfigFlags) -> Result<(Config, Overrides)> {
    let layers = layers(flags)?;
    let config = layers.resolve()?;
    config
        .check_options()
        .map_err(|e| layers.overrides.in_words(e))?;
    Ok((config, layers.overrides))
}

/// The flags as layers: `--preset`, `--config`, then one override per flag given.
fn layers(f: &ConfigFlags) -> melkit::core::Result<Layers> {
    let mut o = Overrides::default();
    o.set_some("output.dtype", "--dtype", f.dtype.as_ref())?;
    o.set_some("mel.precision", "--precision", f.precision.as_ref())?;
    o.set_some("run.backend", "--backend", f.backend.as_ref())?;
    o.set_some("run.loader", "--loader", f.loader.as_ref())?;
    o.set_some("run.threads", "--threads", f.threads.as_ref())?;
    o.set_some("run.batch_clips", "--batch", f.batch.as_ref())?;
    o.set_some("output.sink", "--sink", f.sink.as_ref())?;
    o.set_some("run.queue_depth", "--queue-depth", f.queue_depth.as_ref())?;
    o.set_some("run.stream.readers", "--readers", f.readers.as_ref())?;
    o.set_some("run.device", "--device", f.device.as_ref())?;
    let cache_dir = f.cache_dir.as_ref().map(|d| d.display().to_string());
    o.set_some("run.cache_dir", "--cache-dir", cache_dir.as_ref())?;
    Ok(Layers {
        preset: f.preset,
        base: f.config.clone().map(Base::File),
        overrides: o,
    })
}

/// The configuration as TOML, each value torchaudio's defaults derive (`win_length` =
/// `n_fft`, `hop_length` = `win_length / 2`, `f_max` = `sample_rate / 2`) written as
/// `"default"` with what it resolves to.
pub fn annotated_toml(config: &Config) -> String {
    let m = &config.mel;
    let derived = [
        (
            "win_length",
            m.win_length.is_none(),
            m.win_length().to_string(),
            "n_fft",
        ),
        (
            "hop_length",
            m.hop_length.is_none(),
            m.hop_length().to_string(),
            "win_length / 2",
        ),
        (
            "f_max",
            m.f_max.is_none(),
            format!("{:?}", m.f_max(config.audio.sample_rate)),
            "audio.sample_rate / 2",
        ),
    ];
    let mut out = String::new();
    let mut section = String::new();
    for line in config.to_toml().lines() {
        if line.starts_with('[') {
            section = line.to_string();
        }
        out += line;
        if section == "[mel]" {
            for (key, unset, value, rule) in &derived {
                if *unset && line.starts_with(&format!("{key} =")) {
                    out += &format!("  # = {value}, derived: {rule} (torchaudio's default)");
                }
            }
        }
        out.push('\n');
        // `precision = "exact"` (the default) is not serialised; name it here.
        if section == "[mel]" && line.starts_with("norm =") && m.precision.is_exact() {
            out += "# precision = \"exact\"  (the default; \"fast\": plain float32 transforms, docs/numerics.md)\n";
        }
    }
    out
}
