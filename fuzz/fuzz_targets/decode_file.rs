//! Any bytes as a file on disk, decoded by path (the hound and symphonia paths that read
//! from the file, not from memory): an error or a clip, never a panic or an unbounded
//! allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mel_core::config::{AudioConfig, TrimPolicy};

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for (name, trim) in [("x.wav", TrimPolicy::Center), ("x.flac", TrimPolicy::Start)] {
        let path = dir.path().join(name);
        std::fs::write(&path, data).expect("write the input");
        let audio = AudioConfig {
            sample_rate: 4096,
            clip_seconds: 0.25,
            trim,
            ..AudioConfig::default()
        };
        let mut dst = vec![0.0f32; audio.clip_samples()];
        let _ = mel_audio::decode_into(&path, &audio, &mut dst);
    }
});
