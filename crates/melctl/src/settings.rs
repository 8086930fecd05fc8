//! Resolving the configuration: preset, then the TOML file, then flags.

use anyhow::Result;
use melkit::core::config::{BackendKind, LoaderKind, SinkKind};
use melkit::core::spec::Precision;
use melkit::core::{Config, Dtype, Preset};

use crate::cli::{BackendArg, ConfigFlags, DtypeArg, LoaderArg, PrecisionArg, PresetArg, SinkArg};

/// The configuration the flags describe (not yet validated: see `MelPlan::new`).
pub fn resolve(flags: &ConfigFlags) -> Result<Config> {
    let preset = match flags.preset {
        PresetArg::Leak4k => Preset::Leak4k,
        PresetArg::Speech16k => Preset::Speech16k,
    };
    let mut config = preset.config();
    if let Some(path) = &flags.config {
        // Bounded by the bytes read and never blocking: a FIFO or /dev/zero is refused.
        config = Config::merge_file(&config, path)?;
    }
    if let Some(d) = flags.dtype {
        config.output.dtype = match d {
            DtypeArg::F32 => Dtype::F32,
            DtypeArg::F16 => Dtype::F16,
            DtypeArg::Bf16 => Dtype::Bf16,
        };
    }
    if let Some(p) = flags.precision {
        config.mel.precision = match p {
            PrecisionArg::Exact => Precision::Exact,
            PrecisionArg::Fast => Precision::Fast,
        };
    }
    if let Some(b) = flags.backend {
        config.run.backend = match b {
            BackendArg::Auto => BackendKind::Auto,
            BackendArg::Cpu => BackendKind::Cpu,
            BackendArg::Cuda => BackendKind::Cuda,
            BackendArg::Wgpu => BackendKind::Wgpu,
        };
    }
    if let Some(l) = flags.loader {
        config.run.loader = match l {
            LoaderArg::Auto => LoaderKind::Auto,
            LoaderArg::Preload => LoaderKind::Preload,
            LoaderArg::Memmap => LoaderKind::Memmap,
            LoaderArg::Stream => LoaderKind::Stream,
        };
    }
    if let Some(t) = flags.threads {
        config.run.threads = t;
    }
    if let Some(b) = flags.batch {
        config.run.batch_clips = b;
    }
    if let Some(k) = flags.sink {
        config.output.sink = match k {
            SinkArg::Hdf5 => SinkKind::Hdf5,
            SinkArg::Npy => SinkKind::Npy,
        };
    }
    if let Some(q) = flags.queue_depth {
        config.run.queue_depth = q;
    }
    if let Some(r) = flags.readers {
        config.run.stream.readers = r;
    }
    if let Some(d) = &flags.device {
        config.run.device = Some(d.clone());
    }
    if let Some(d) = &flags.cache_dir {
        config.run.cache_dir = d.display().to_string();
    }
    Ok(config)
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
