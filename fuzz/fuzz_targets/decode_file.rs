//! Any bytes as a file on disk, decoded by path (the WAV and symphonia routes that read
//! from the file, not from memory) and probed as a dry run does: an error or a clip, never
//! a panic or an unbounded allocation, and the probe refuses whatever decoding refuses
//! for any reason but the samples' values (corrupt, non-finite) and the resampler's own limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mel_core::spec::{AudioConfig, TrimPolicy};

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
        let decoded = mel_audio::decode_into(&path, &audio, &mut dst);
        let probed = mel_audio::probe(&path, &audio);
        if let (Err(d), Ok(())) = (&decoded, &probed) {
            let d = d.to_string();
            assert!(
                ["non-finite", "corrupt", "decoder failed", "resampling"]
                    .iter()
                    .any(|w| d.contains(w)),
                "probe passed what decoding refused: {d}"
            );
        }
    }
});
