//! One fingerprint of "these files with these audio settings", shared by everything that
//! must notice a changed input: the memmap cache and the resume journal.

use mel_core::spec::AudioConfig;
use xxhash_rust::xxh3::Xxh3;

use crate::scan::FileEntry;

/// xxh3-128 over the audio settings and every file's relative path, label, metadata, size,
/// modification time and identity: device, inode and status-change time (a file that
/// cannot be read hashes as missing). Any added, removed, renamed, relabelled, rewritten
/// or touched file changes it, including a same-size file copied over another with its
/// modification time kept (`cp -p`, `rsync -a`, `touch -r`): the kernel sets the change
/// time to now on every write, and no user can set it back.
pub fn files_fingerprint(files: &[FileEntry], audio: &AudioConfig) -> u128 {
    use std::os::unix::fs::MetadataExt;
    let mut h = Xxh3::new();
    h.update(
        serde_json::to_string(audio)
            .expect("the audio settings serialise")
            .as_bytes(),
    );
    h.update(&(files.len() as u64).to_le_bytes());
    for f in files {
        let identity: [u64; 7] = match std::fs::metadata(&f.path) {
            Ok(m) => [
                m.len(),
                m.mtime() as u64,
                m.mtime_nsec() as u64,
                m.ctime() as u64,
                m.ctime_nsec() as u64,
                m.dev(),
                m.ino(),
            ],
            Err(_) => [u64::MAX, 0, 0, 0, 0, 0, 0],
        };
        // Metadata is in the listing (none for a folder without groups: the hash is then
        // what it was before metadata).
        f.hash_listing(&mut h);
        for v in identity {
            h.update(&v.to_le_bytes());
        }
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
            meta: Default::default(),
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

    /// A same-size file copied over another with the old modification time put back (as
    /// `cp -p`, `rsync -a` or `touch -r` do) served the stale cache with exit 0.
    #[test]
    fn changes_when_same_size_content_keeps_its_modification_time() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("a.wav");
        std::fs::write(&p, b"abcd").unwrap();
        let files = vec![FileEntry {
            meta: Default::default(),
            path: p.clone(),
            rel: "a.wav".into(),
            label: 0,
        }];
        let audio = AudioConfig::default();
        let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
        let f0 = files_fingerprint(&files, &audio);
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&p, b"wxyz").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), mtime);
        assert_ne!(f0, files_fingerprint(&files, &audio));
    }
}
