//! Resolving the configuration: preset, then the TOML file, then flags.

use anyhow::Result;
use melkit::core::Config;

use crate::cli::ConfigFlags;

/// The configuration the flags describe (not yet validated: see `MelPlan::new`).
pub fn resolve(flags: &ConfigFlags) -> Result<Config> {
    let mut config = flags.preset.config();
    if let Some(path) = &flags.config {
        // Bounded by the bytes read and never blocking: a FIFO or /dev/zero is refused.
        config = Config::merge_file(&config, path)?;
    }
    let (run, output) = (&mut config.run, &mut config.output);
    set(&mut output.dtype, flags.dtype);
    set(&mut config.mel.precision, flags.precision);
    set(&mut run.backend, flags.backend);
    set(&mut run.loader, flags.loader);
    set(&mut run.threads, flags.threads);
    set(&mut run.batch_clips, flags.batch);
    set(&mut output.sink, flags.sink);
    set(&mut run.queue_depth, flags.queue_depth);
    set(&mut run.stream.readers, flags.readers);
    if let Some(d) = &flags.device {
        run.device = Some(d.clone());
    }
    if let Some(d) = &flags.cache_dir {
        run.cache_dir = d.display().to_string();
    }
    Ok(config)
}

/// A flag given overrides the file's or the preset's value.
fn set<T>(field: &mut T, flag: Option<T>) {
    if let Some(v) = flag {
        *field = v;
    }
}

/// The configuration fields the flags set, and each flag.
const FLAGS: [(&str, &str); 11] = [
    ("output.dtype", "--dtype"),
    ("mel.precision", "--precision"),
    ("run.backend", "--backend"),
    ("run.loader", "--loader"),
    ("run.threads", "--threads"),
    ("run.batch_clips", "--batch"),
    ("output.sink", "--sink"),
    ("run.queue_depth", "--queue-depth"),
    ("run.stream.readers", "--readers"),
    ("run.device", "--device"),
    ("run.cache_dir", "--cache-dir"),
];

/// The flag that sets configuration field `field`, if one does.
pub fn flag_for(field: &str) -> Option<&'static str> {
    FLAGS
        .iter()
        .find(|(f, _)| *f == field)
        .map(|(_, flag)| *flag)
}

/// `e` in the CLI's words: a configuration error names the flag that sets its field.
pub fn in_flag_words(e: melkit::core::Error) -> anyhow::Error {
    match e {
        melkit::core::Error::Config { field, message } => match flag_for(&field) {
            Some(flag) => melkit::core::Error::config(format!("{field} ({flag})"), message).into(),
            None => melkit::core::Error::Config { field, message }.into(),
        },
        e => e.into(),
    }
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
