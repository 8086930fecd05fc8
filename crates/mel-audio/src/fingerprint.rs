//! One fingerprint of "these files with these audio settings", shared by everything that
//! must notice a changed input: the memmap cache and the resume journal.

use std::time::UNIX_EPOCH;

use mel_core::config::AudioConfig;
use xxhash_rust::xxh3::Xxh3;

use crate::scan::FileEntry;

/// xxh3-128 over the audio settings and every file's relative path, label, size and
/// modification time (a file that cannot be read hashes as missing). Any added, removed,
/// renamed, relabelled, rewritten or touched file changes it.
pub fn files_fingerprint(files: &[FileEntry], audio: &AudioConfig) -> u128 {
    let mut h = Xxh3::new();
    h.update(
        serde_json::to_string(audio)
            .expect("the audio settings serialise")
            .as_bytes(),
    );
    h.update(&(files.len() as u64).to_le_bytes());
    for f in files {
        let (size, mtime) = match std::fs::metadata(&f.path) {
            Ok(m) => {
                let t = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map(|d| d.as_nanos())
                    .unwrap_or(0);
                (m.len(), t)
            }
            Err(_) => (u64::MAX, 0),
        };
        h.update(f.rel.as_bytes());
        h.update(&[0]);
        h.update(&f.label.to_le_bytes());
        h.update(&size.to_le_bytes());
        h.update(&mtime.to_le_bytes());
    }
    h.digest128()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_with_content_label_and_settings() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("a.wav");
        std::fs::write(&p, b"abc").unwrap();
        let mut files = vec![FileEntry {
            path: p.clone(),
            rel: "a.wav".into(),
            label: 0,
        }];
        let audio = AudioConfig::default();
        let f0 = files_fingerprint(&files, &audio);
        assert_eq!(f0, files_fingerprint(&files, &audio));
        files[0].label = 1;
        assert_ne!(f0, files_fingerprint(&files, &audio));
        files[0].label = 0;
        std::fs::write(&p, b"abcd").unwrap();
        assert_ne!(f0, files_fingerprint(&files, &audio));
        let f1 = files_fingerprint(&files, &audio);
        let other = AudioConfig {
            clip_seconds: 2.0,
            ..audio.clone()
        };
        assert_ne!(f1, files_fingerprint(&files, &other));
    }
}
