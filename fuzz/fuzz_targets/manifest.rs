//! Any bytes as a CSV or JSONL manifest: a dataset or an error naming the line, never a
//! panic; names that could escape the output folder are refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mel_audio::ManifestOptions;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for name in ["m.csv", "m.jsonl"] {
        let path = dir.path().join(name);
        std::fs::write(&path, data).expect("write the manifest");
        if let Ok(d) = mel_audio::from_manifest(&path, &ManifestOptions::default()) {
            for s in &d.splits {
                assert!(mel_audio::scan::check_name(&s.name).is_ok(), "{:?}", s.name);
            }
            for l in &d.label_names {
                assert!(mel_audio::scan::check_name(l).is_ok(), "{l:?}");
            }
        }
    }
});
