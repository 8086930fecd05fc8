//! Any bytes as what a reader trusts nothing in: an npy header's dictionary, a build
//! record (`melctl-build.json`), an HDF5 split, and an npy split folder (`meta.json`,
//! `mel.npy`, `label.npy` cut from the bytes). Refused, or read, every clip of what opens
//! checked; never a panic, a hang or an allocation the bytes size.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Reads every clip (at most 64) of a split that opened: each read is a value or an error.
fn read_some(split: &melread::Split) {
    let mut reader = split.reader();
    let mut out = vec![0.0f32; split.values_per_clip().min(1 << 20)];
    for clip in 0..split.clips().min(64) {
        if out.len() == split.values_per_clip() {
            let _ = reader.read_clip(clip, &mut out, None);
        }
        let _ = reader.raw(clip, None);
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = mel_core::format::npy::parse_dict(&String::from_utf8_lossy(data));
    let dir = tempfile::tempdir().expect("a temporary folder");
    std::fs::write(mel_core::record::path(dir.path()), data).expect("write the record");
    let _ = mel_core::record::read(dir.path());

    let h5 = dir.path().join("training.h5");
    std::fs::write(&h5, data).expect("write the split");
    if let Ok(split) = melread::Split::open(&h5) {
        read_some(&split);
    }

    // The first two bytes say where meta.json ends, the next two where mel.npy ends.
    let cut = |at: usize| -> usize {
        data.get(at..at + 2)
            .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize)
    };
    let rest = data.get(4..).unwrap_or_default();
    let a = cut(0).min(rest.len());
    let b = (a + cut(2)).min(rest.len());
    let npy = dir.path().join("training.npy.d");
    std::fs::create_dir(&npy).expect("a split folder");
    std::fs::write(npy.join("meta.json"), &rest[..a]).expect("write meta.json");
    std::fs::write(npy.join("mel.npy"), &rest[a..b]).expect("write mel.npy");
    std::fs::write(npy.join("label.npy"), &rest[b..]).expect("write label.npy");
    if let Ok(split) = melread::Split::open(&npy) {
        read_some(&split);
    }
});
