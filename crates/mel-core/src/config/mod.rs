//! The configuration model: every knob of a build, with documented defaults,
//! TOML (de)serialisation, built-in presets and layered merging.
//!
//! Layering: a preset gives a complete configuration; a TOML file overrides the
//! keys it names; command-line flags override both. The default configuration is
//! the `leak-4k` preset.
//!
//! A configuration is the [spec](crate::spec) (what determines output values) plus the
//! [run options](options) (how the build runs), with TOML layering and the [presets](preset).

mod options;
mod preset;

pub use options::*;
pub use preset::Preset;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::spec::{AudioConfig, LogScale, MelConfig, MelSpec, SegmentConfig};

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
        let overlay: toml::Table = toml::from_str(text).map_err(|e| parse_err(e.to_string()))?;
        let mut merged = toml::Table::try_from(base).map_err(|e| parse_err(e.to_string()))?;
        merge_tables(&mut merged, overlay);
        toml::Value::Table(merged)
            .try_into()
            .map_err(|e: toml::de::Error| parse_err(e.to_string()))
    }

    /// Parses a TOML text on top of the default configuration.
    pub fn from_toml(text: &str) -> Result<Config> {
        Config::merge_toml(&Config::default(), text, None)
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

/// Deep-merges `overlay` into `base`. A table that carries a `kind` tag different
/// from the base's replaces it whole (its other keys belong to the new kind).
fn merge_tables(base: &mut toml::Table, overlay: toml::Table) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o))
                if b.get("kind").is_none()
                    || o.get("kind").is_none()
                    || b.get("kind") == o.get("kind") =>
            {
                merge_tables(b, o)
            }
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
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
