//! The built-in presets: complete configurations named on the command line.

use crate::named::Named;
use serde::{Deserialize, Serialize};

use super::Config;
use super::options::{Hdf5Config, OutputConfig, RunConfig};
use crate::error::{Error, Result};
use crate::spec::{AudioConfig, LogScale, MelConfig, MelSpec, SegmentConfig, StageSetting};

crate::named::named!(
    Preset,
    "preset",
    [
        (
            Preset::Leak4k,
            "leak-4k",
            "4096 Hz, 10 s clips, two-stage segmentation, 32 mels, f16"
        ),
        (
            Preset::Speech16k,
            "speech-16k",
            "16 kHz, 1 s clips, n_fft 400, hop 160, 80 mels, one spectrogram per clip"
        ),
    ]
);

/// The built-in presets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Preset {
    /// 4096 Hz vibration clips of 10 s, two-stage segmentation, 32 mels (WORKLOAD.md); the
    /// default.
    #[default]
    #[serde(rename = "leak-4k")]
    Leak4k,
    /// 16 kHz speech, 1 s clips, n_fft 400, hop 160, 80 mels, no segmentation.
    #[serde(rename = "speech-16k")]
    Speech16k,
}

impl Preset {
    /// Looks a preset up by name ([`Named::parse_name`] as the typed error).
    pub fn from_name(name: &str) -> Result<Preset> {
        Preset::parse_name(name).map_err(|_| Error::UnknownPreset {
            name: name.to_string(),
            known: Preset::ALL
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// The preset's spec (what determines the output values).
    pub fn spec(self) -> MelSpec {
        self.config().spec()
    }

    /// The preset's complete configuration.
    pub fn config(self) -> Config {
        match self {
            Preset::Leak4k => Config {
                audio: AudioConfig::default(),
                segment: SegmentConfig::default(),
                mel: MelConfig::default(),
                log: LogScale::default(),
                output: OutputConfig::default(),
                run: RunConfig::default(),
                hdf5: Hdf5Config::default(),
            },
            Preset::Speech16k => Config {
                audio: AudioConfig {
                    sample_rate: 16000,
                    clip_seconds: 1.0,
                    ..AudioConfig::default()
                },
                segment: SegmentConfig {
                    long: StageSetting::OFF,
                    short: StageSetting::OFF,
                },
                mel: MelConfig {
                    n_fft: 400,
                    win_length: Some(400),
                    hop_length: Some(160),
                    n_mels: 80,
                    f_max: Some(8000.0),
                    ..MelConfig::default()
                },
                log: LogScale::default(),
                output: OutputConfig::default(),
                run: RunConfig::default(),
                hdf5: Hdf5Config::default(),
            },
        }
    }
}
