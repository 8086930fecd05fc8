//! Any bytes, under any of the names a dataset may give them, must decode or fail with
//! an error: never panic, never allocate without bound.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use mel_core::spec::{AudioConfig, TrimPolicy};

fuzz_target!(|data: &[u8]| {
    for (name, trim) in [
        ("x.wav", TrimPolicy::Start),
        ("x.flac", TrimPolicy::Center),
        ("x.mp3", TrimPolicy::Start),
        ("x.ogg", TrimPolicy::Center),
    ] {
        let audio = AudioConfig {
            sample_rate: 4096,
            clip_seconds: 0.25,
            trim,
            ..AudioConfig::default()
        };
        let mut dst = vec![0.0f32; audio.clip_samples()];
        let _ = mel_audio::decode_bytes_into(data, Path::new(name), &audio, &mut dst);
    }
});
