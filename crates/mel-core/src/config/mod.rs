//! The configuration model: every knob of a build, with documented defaults,
//! TOML (de)serialisation, built-in presets and layered merging.
//!
//! Layering: a preset gives a complete configuration; a TOML file overrides the
//! keys it names; command-line flags override both. The default configuration is
//! the `leak-4k` preset.
//!
//! A configuration is the [spec](crate::spec) (what determines output values) plus the
//! [run options](options) (how the build runs), with TOML layering and the [presets](preset).

mod identity;
mod layers;
mod options;
mod preset;

pub use crate::named::Named;
pub use identity::Sameness;
pub use layers::{Base, Layers, Overrides};
pub use options::*;
pub use preset::Preset;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::spec::{AudioConfig, LogScale, MelConfig, MelSpec, SegmentConfig};

/// Configuration files larger than this are refused, by every front end (every key fits
/// in a few KiB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// A complete build configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// How audio is brought to a fixed-length mono clip.
    pub audio: AudioConfig,
    /// The two-stage segmentation of each clip.
    pub segment: SegmentConfig,
    /// The mel spectrogram of each segment (torchaudio `MelSpectrogram`).
    pub mel: MelConfig,
    /// The log compression applied after the mel filterbank.
    pub log: LogScale,
    /// The stored output.
    pub output: OutputConfig,
    /// Which loader, backend and parallelism to use.
    pub run: RunConfig,
    /// Options of the HDF5 sink.
    pub hdf5: Hdf5Config,
}

impl Default for Config {
    fn default() -> Self {
        Preset::Leak4k.config()
    }
}

impl Default for MelSpec {
    fn default() -> Self {
        Config::default().spec()
    }
}

impl Config {
    /// The part of the configuration that determines output values.
    pub fn spec(&self) -> MelSpec {
        MelSpec {
            audio: self.audio.clone(),
            segment: self.segment.clone(),
            mel: self.mel.clone(),
            log: self.log,
            dtype: self.output.dtype,
        }
    }

    /// Checks the options outside the spec (run, HDF5) and returns the first problem,
    /// naming the field and the limit. The spec itself is checked by `MelPlan::new`.
    pub fn check_options(&self) -> Result<()> {
        self.run.check()?;
        self.hdf5.check()
    }

    /// Parses a complete or partial TOML text on top of `base` (keys absent from the text keep `base`'s values).
    pub fn merge_toml(base: &Config, text: &str, source_name: Option<&str>) -> Result<Config> {
        let parse_err = |message: String| Error::ConfigParse {
            source_name: source_name.map(str::to_string),
            message,
        };
        let overlay: toml::Table =
            toml::from_str(text).map_err(|e| parse_err(toml_error(&e, text)))?;
        merge_table(base, overlay, source_name)
    }

    /// Reads the TOML file at `path` (at most [`MAX_CONFIG_BYTES`], never blocking: a
    /// FIFO or a device is refused) on top of `base`.
    pub fn merge_file(base: &Config, path: &std::path::Path) -> Result<Config> {
        let text = crate::input::read_bounded_text(path, MAX_CONFIG_BYTES)
            .map_err(|e| Error::io(path, e))?;
        Config::merge_toml(base, &text, Some(&path.display().to_string()))
    }

    /// Parses a TOML text on top of the default configuration.
    pub fn from_toml(text: &str) -> Result<Config> {
        Config::merge_toml(&Config::default(), text, None)
    }

    /// Every key a configuration may set, as dotted paths (`mel.n_mels`, `log.top_db`,
    /// `run.stream.in_flight`), sorted: those unset by default (`log.top_db`,
    /// `run.device`, `mel.precision`) and those of every `log.kind` included. The one
    /// list a front end looks a bare key up in (`n_mels` is `mel.n_mels`).
    pub fn key_paths() -> Vec<String> {
        use crate::spec::Precision;
        let mut every = Config::default();
        every.mel.precision = Precision::Fast;
        // Keys written only away from their defaults.
        every.audio.length = crate::spec::ClipLength::Whole;
        every.audio.max_seconds = 60.0;
        every.audio.windows = Some(crate::spec::Windows {
            seconds: 10.0,
            hop_seconds: 5.0,
        });
        every.log = LogScale::Db {
            amin: 1e-10,
            top_db: Some(80.0),
        };
        let ln = Config {
            log: LogScale::Ln { offset: 1e-6 },
            ..Config::default()
        };
        let mut paths = std::collections::BTreeSet::new();
        for c in [every, ln] {
            let v = serde_json::to_value(&c).expect("a Config always serialises to JSON");
            leaf_paths(&v, "", &mut paths);
        }
        paths.into_iter().collect()
    }

    /// The keys a configuration may leave unset (`run.device`, `log.top_db`): those null
    /// in a default configuration's JSON. A front end may take "none" for these, and only
    /// these (torchaudio's derived values are the word `"default"`, not none).
    pub fn optional_keys() -> Vec<String> {
        let mut paths = std::collections::BTreeSet::new();
        let v = serde_json::to_value(Config::default()).expect("a Config always serialises");
        leaf_paths(&v, "", &mut paths);
        paths
            .into_iter()
            .filter(|p| pointer(&v, p).is_some_and(serde_json::Value::is_null))
            .chain(["log.top_db".to_string()])
            .collect()
    }

    /// Serialises to TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a Config always serialises to TOML")
    }

    /// The configuration with every defaulted field made explicit, as JSON (stored in outputs).
    pub fn resolved_json(&self) -> String {
        let mut resolved = self.clone();
        resolved.mel = self.spec().resolved().mel;
        serde_json::to_string(&resolved).expect("a Config always serialises to JSON")
    }
}

/// Merges a table onto `base` (keys absent from it keep `base`'s values) and checks the
/// result as a whole configuration; errors name `source_name`.
fn merge_table(base: &Config, overlay: toml::Table, source_name: Option<&str>) -> Result<Config> {
    let parse_err = |message: String| Error::ConfigParse {
        source_name: source_name.map(str::to_string),
        message,
    };
    let mut merged = toml::Table::try_from(base).map_err(|e| parse_err(e.to_string()))?;
    merge_tables(&mut merged, overlay, "").map_err(parse_err)?;
    toml::Value::Table(merged)
        .try_into()
        .map_err(|e: toml::de::Error| parse_err(crate::error::one_line(&e.to_string())))
}

/// A TOML error in one line: its message and, where it has one in `text`, the line and
/// column. Never the offending line itself, which toml's own display quotes: a file
/// given as a configuration by mistake (`/etc/shadow`) is not echoed.
fn toml_error(e: &toml::de::Error, text: &str) -> String {
    let message = crate::error::one_line(e.message());
    match e.span() {
        Some(span) => {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

/// The value at dotted `path` in `v`.
fn pointer<'a>(v: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    v.pointer(&format!("/{}", path.replace('.', "/")))
}

/// Adds the dotted path of every leaf of `v` (a value that is not an object; `null`
/// included: an unset optional key) under `prefix` to `paths`.
fn leaf_paths(v: &serde_json::Value, prefix: &str, paths: &mut std::collections::BTreeSet<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaf_paths(v, &path, paths);
            }
        }
        _ => {
            paths.insert(prefix.to_string());
        }
    }
}

/// Deep-merges `overlay` into `base` (`prefix`: the dotted path of both, for errors). A
/// table that carries a `kind` tag different from the base's replaces it whole (its other
/// keys belong to the new kind). A section given an array is refused: serde would read
/// it as the section's fields by position (`mel = [512]` as n_fft). (A string may stand
/// for a section: `segment.long = "off"`.)
fn merge_tables(
    base: &mut toml::Table,
    overlay: toml::Table,
    prefix: &str,
) -> std::result::Result<(), String> {
    for (key, value) in overlay {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(_)), v) if v.is_array() => {
                return Err(format!(
                    "`{path}` is a section: expected a table of its keys, found {}",
                    v.type_str()
                ));
            }
            (Some(toml::Value::Table(b)), toml::Value::Table(o))
                if b.get("kind").is_none()
                    || o.get("kind").is_none()
                    || b.get("kind") == o.get("kind") =>
            {
                merge_tables(b, o, &path)?
            }
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Dtype;

    #[test]
    fn default_is_leak_4k_and_roundtrips_through_toml() {
        let c = Config::default();
        assert_eq!(c, Preset::Leak4k.config());
        assert_eq!(c.audio.clip_samples(), 40_960);
        let back = Config::from_toml(&c.to_toml()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn optional_keys_are_those_a_configuration_may_leave_unset() {
        let optional = Config::optional_keys();
        for key in ["run.device", "log.top_db"] {
            assert!(optional.iter().any(|k| k == key), "{key}: {optional:?}");
        }
        assert!(!optional.iter().any(|k| k == "audio.clip_seconds"));
    }

    #[test]
    fn speech_preset_roundtrips_with_segmentation_off() {
        let c = Preset::Speech16k.config();
        let text = c.to_toml();
        assert!(text.contains("long = \"off\""), "{text}");
        let back = Config::merge_toml(&Config::default(), &text, None).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.segment.long.get(), None);
    }

    #[test]
    fn partial_file_overrides_only_its_keys() {
        let c = Config::from_toml("[mel]\nn_mels = 64\n[output]\ndtype = \"bf16\"\n").unwrap();
        assert_eq!(c.mel.n_mels, 64);
        assert_eq!(c.output.dtype, Dtype::Bf16);
        assert_eq!(c.mel.n_fft, 512);
        assert_eq!(c.audio.sample_rate, 4096);
    }

    #[test]
    fn switching_log_kind_replaces_the_table() {
        let c = Config::from_toml("[log]\nkind = \"ln\"\n").unwrap();
        assert_eq!(c.log, LogScale::Ln { offset: 1e-6 });
        let c = Config::from_toml("[log]\ntop_db = 80.0\n").unwrap();
        assert_eq!(
            c.log,
            LogScale::Db {
                amin: 1e-10,
                top_db: Some(80.0)
            }
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_are_rejected_with_location() {
        let e = Config::from_toml("[mel]\nn_mel = 64\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("n_mel"), "{e}");
        let e = Config::from_toml("[mel]\nwindow = \"blackman\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("blackman"), "{e}");
        let e = Preset::from_name("leak4k").unwrap_err().to_string();
        assert!(e.contains("leak-4k, speech-16k"), "{e}");
    }

    #[test]
    fn absurd_run_settings_and_memory_are_refused_with_field_figure_and_limit() {
        let mut c = Config::default();
        c.run.queue_depth = 1_000_000_000;
        let e = c.check_options().unwrap_err().to_string();
        assert!(e.contains("run.queue_depth") && e.contains("1024"), "{e}");
        let mut c = Config::default();
        c.run.threads = 5000;
        assert!(
            c.check_options()
                .unwrap_err()
                .to_string()
                .contains("run.threads")
        );
    }

    #[test]
    fn default_words_restore_torchaudio_derived_values() {
        let c = Config::from_toml(
            "[mel]\nn_fft = 1024\nwin_length = \"default\"\nhop_length = \"default\"\nf_max = \"default\"\n",
        )
        .unwrap();
        assert_eq!((c.mel.win_length(), c.mel.hop_length()), (1024, 512));
        assert_eq!(c.mel.f_max(c.audio.sample_rate), 2048.0);
        // "default" survives a round trip through TOML.
        assert_eq!(Config::from_toml(&c.to_toml()).unwrap(), c);
        assert!(Config::from_toml("[mel]\nwin_length = \"auto\"\n").is_err());
    }

    /// A parse error says where, never quotes the line: a file given as a configuration
    /// by mistake (`/etc/shadow`) was echoed in toml's message.
    #[test]
    fn a_parse_error_names_the_place_not_the_text() {
        let e = Config::from_toml("root:$6$SECRETHASH:19000::\n")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("SECRET") && e.contains("line 1, column"), "{e}");
        assert!(!e.contains('\n'), "one line: {e}");
        let e = Config::from_toml("[mel]\nn_mels = \"64\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("mel.n_mels") && !e.contains('\n'), "{e}");
    }

    /// The key list is what the deserialiser accepts: every section's own list of fields
    /// (serde names them when refusing an unknown one) is in it, and every listed key is
    /// accepted. `top_db` and `device`, unset by default, were missing from a list made
    /// by serialising a configuration.
    #[test]
    fn key_paths_are_every_key_the_configuration_accepts() {
        let paths = Config::key_paths();
        for key in [
            "log.top_db",
            "run.device",
            "mel.precision",
            "log.offset",
            "log.kind",
        ] {
            assert!(paths.iter().any(|p| p == key), "{key} in {paths:?}");
        }
        let sections: std::collections::BTreeSet<String> = paths
            .iter()
            .filter_map(|p| p.rsplit_once('.').map(|(s, _)| s.to_string()))
            .collect();
        for section in &sections {
            let text = format!("[{section}]\nno_such_key_here = 1\n");
            let e = Config::from_toml(&text).unwrap_err().to_string();
            // An untagged value (`segment.long`: off, or a window and hop) names no fields.
            if !e.contains("unknown field") {
                continue;
            }
            // "expected `a`", "expected `a` or `b`", "expected one of `a`, `b`, `c`".
            let expected = e
                .split_once("expected ")
                .unwrap_or_else(|| panic!("[{section}]: {e}"))
                .1;
            // Where (`in \`audio\``) is not a field.
            let expected = expected.split(" in `").next().unwrap_or_default();
            let fields: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
            assert!(!fields.is_empty(), "[{section}]: {e}");
            for field in fields {
                let key = format!("{section}.{field}");
                let sub = format!("{key}.");
                assert!(
                    paths.iter().any(|p| *p == key || p.starts_with(&sub)),
                    "{section}.{field} is accepted but not listed: {e}"
                );
            }
        }
        // And nothing listed is refused as unknown (each set to its own default).
        let all = serde_json::to_value(Config::default()).unwrap();
        for p in &paths {
            let (section, key) = p.rsplit_once('.').unwrap();
            let kind = if p == "log.offset" {
                "kind = \"ln\"\n"
            } else {
                ""
            };
            let text = format!("[{section}]\n{kind}{key} = 0\n");
            if let Err(e) = Config::from_toml(&text) {
                assert!(!e.to_string().contains("unknown field"), "{p}: {e} ({all})");
            }
        }
    }

    #[test]
    fn resolved_json_makes_defaults_explicit() {
        let c = Config::from_toml("[mel]\nn_fft = 1024\n").unwrap();
        let mut c2 = c.clone();
        c2.mel.win_length = None;
        c2.mel.hop_length = None;
        c2.mel.f_max = None;
        let v: serde_json::Value = serde_json::from_str(&c2.resolved_json()).unwrap();
        assert_eq!(v["mel"]["win_length"], 1024);
        assert_eq!(v["mel"]["hop_length"], 512);
        assert_eq!(v["mel"]["f_max"], 2048.0);
    }
}
