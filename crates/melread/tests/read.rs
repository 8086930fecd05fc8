//! Reading melctl outputs back: every layout and dtype gives the values the sinks
//! wrote, by every read path; damaged and hostile files are refused with a clear error.

mod common;

use std::os::unix::fs::FileExt;

use common::{CLASSES, Out, build, expected_clip};
use melkit::{Dtype, Preset};
use melread::{Access, Error, Format, OpenOptions, ReadMode, Split};

const CHUNKED: Out = Out::Hdf5 {
    chunk_clips: 4,
    gzip: 1,
};
const CONTIGUOUS: Out = Out::Hdf5 {
    chunk_clips: 0,
    gzip: 0,
};

/// Every value of every clip, read clip by clip.
fn all_values(split: &Split) -> Vec<f32> {
    let mut r = split.reader();
    let mut out = vec![0.0; split.clips() * split.values_per_clip()];
    for (c, chunk) in out.chunks_exact_mut(split.values_per_clip()).enumerate() {
        r.read_clip(c, chunk, None).unwrap();
    }
    out
}

#[test]
fn every_layout_dtype_and_read_path_gives_the_stored_values() {
    let t = tempfile::tempdir().unwrap();
    for dtype in [Dtype::F16, Dtype::F32, Dtype::Bf16] {
        let mut reference: Option<Vec<f32>> = None;
        for (k, out) in [
            CONTIGUOUS,
            CHUNKED,
            Out::Hdf5 {
                chunk_clips: 3,
                gzip: 0,
            },
            Out::Npy,
        ]
        .into_iter()
        .enumerate()
        {
            let dir = build(
                &t.path().join(format!("{dtype:?}-{k}")),
                Preset::Leak4k,
                dtype,
                out,
                &[("training", 10)],
            );
            let split = Split::open_in(&dir, "training").unwrap();
            assert_eq!(split.shape(), &[10, 79, 3, 32, 5]);
            assert_eq!(split.dims(), ["clip", "long", "short", "mel", "frame"]);
            assert_eq!(split.dtype(), dtype);
            assert_eq!(split.segments_per_clip(), 237);
            assert_eq!(split.segment_shape(), [32, 5]);
            assert_eq!(split.label_names(), CLASSES);
            assert_eq!(split.labels(), &[0, 1, 2, 3, 4, 0, 1, 2, 3, 4]);
            assert_eq!(split.paths()[6], "training/no_leak/training_000006.wav");
            assert_eq!(split.name(), "training");
            assert_eq!(split.config().unwrap()["output"]["dtype"], dtype.name());
            assert!(split.melctl_version().is_some());
            match out {
                Out::Npy => {
                    assert_eq!(split.format(), Format::Npy);
                    assert_eq!(split.access(), &Access::Map);
                }
                Out::Hdf5 { chunk_clips: 0, .. } => assert_eq!(split.access(), &Access::Map),
                Out::Hdf5 { chunk_clips, gzip } => assert_eq!(
                    split.access(),
                    &Access::Chunks {
                        clips_per_chunk: chunk_clips,
                        deflate: gzip > 0,
                        shuffle: gzip > 0
                    }
                ),
            }
            let values = all_values(&split);
            // Clip 7 is what the CPU backend computes for it.
            let clip7 = expected_clip(Preset::Leak4k, dtype, 7 % 5, 8);
            let per = split.values_per_clip();
            assert_eq!(values[7 * per..8 * per], clip7[..], "{dtype:?} {out:?}");
            // A single segment is that window of its clip.
            let seg = split.segment(7, 100).unwrap();
            assert_eq!(
                seg.as_slice().unwrap(),
                &clip7[100 * 160..101 * 160],
                "{dtype:?} {out:?}"
            );
            assert_eq!(split.clip(7).unwrap().shape(), &[79, 3, 32, 5]);
            // Every other read path of the same file agrees.
            let modes: &[ReadMode] = match out {
                Out::Npy => &[ReadMode::Pread],
                Out::Hdf5 { chunk_clips: 0, .. } => &[ReadMode::Pread, ReadMode::Library],
                _ => &[ReadMode::Library],
            };
            for &mode in modes {
                let path = split.path();
                let other = Split::open_with(
                    path,
                    &OpenOptions {
                        read: mode,
                        ..OpenOptions::default()
                    },
                )
                .unwrap();
                assert_eq!(all_values(&other), values, "{dtype:?} {out:?} {mode:?}");
                assert_eq!(
                    other.segment(9, 236).unwrap(),
                    split.segment(9, 236).unwrap()
                );
            }
            match &reference {
                None => reference = Some(values),
                Some(r) => assert_eq!(
                    &values, r,
                    "{dtype:?}: {out:?} differs from contiguous HDF5"
                ),
            }
        }
    }
}

#[test]
fn unsegmented_speech_and_out_of_range_items() {
    let t = tempfile::tempdir().unwrap();
    let dir = build(
        t.path(),
        Preset::Speech16k,
        Dtype::F16,
        CONTIGUOUS,
        &[("testing", 3)],
    );
    let split = Split::open_in(&dir, "testing").unwrap();
    assert_eq!(split.shape(), &[3, 80, 101]);
    assert_eq!(split.segments_per_clip(), 1);
    assert_eq!(split.segment(2, 0).unwrap().shape(), &[80, 101]);
    assert_eq!(
        split.segment(2, 0).unwrap().as_slice().unwrap(),
        &expected_clip(Preset::Speech16k, Dtype::F16, 2, 3)[..]
    );
    assert!(matches!(split.segment(2, 1), Err(Error::Shape(_))));
    assert!(matches!(split.clip(3), Err(Error::Shape(_))));
    let e = Split::open_in(&dir, "validation").unwrap_err().to_string();
    assert!(e.contains("no split \"validation\""), "{e}");
    // Mapping a chunked file is refused with the reason.
    let chunked = build(
        &t.path().join("c"),
        Preset::Speech16k,
        Dtype::F16,
        CHUNKED,
        &[("testing", 3)],
    );
    let e = Split::open_with(
        chunked.join("testing.h5"),
        &OpenOptions {
            read: ReadMode::Map,
            ..OpenOptions::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
}

fn assert_refused(path: &std::path::Path, words: &[&str]) {
    let e = match Split::open(path) {
        Ok(s) => {
            // The header may be fine and the damage in the data: reading must fail.
            let mut r = s.reader();
            let mut buf = vec![0.0; s.values_per_clip()];
            (0..s.clips())
                .map(|c| r.read_clip(c, &mut buf, None))
                .find_map(Result::err)
                .unwrap_or_else(|| panic!("{} opened and read whole", path.display()))
        }
        Err(e) => e,
    };
    let text = e.to_string();
    for w in words {
        assert!(text.contains(w), "{text:?} should say {w:?}");
    }
}

#[test]
fn truncated_and_corrupt_files_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let dir = build(
        t.path(),
        Preset::Leak4k,
        Dtype::F16,
        CONTIGUOUS,
        &[("training", 6)],
    );
    let h5 = dir.join("training.h5");
    let bytes = std::fs::read(&h5).unwrap();

    // Truncated HDF5: the library's own check names it.
    let cut = t.path().join("cut.h5");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert_refused(&cut, &["cut.h5", "truncated"]);
    // Not HDF5 at all; empty.
    let junk = t.path().join("junk.h5");
    std::fs::write(&junk, b"this is not a dataset").unwrap();
    assert_refused(&junk, &["junk.h5", "cannot be opened as an HDF5 file"]);
    std::fs::write(&junk, b"").unwrap();
    assert_refused(&junk, &["junk.h5"]);

    // npy: a truncated mel.npy is refused before anything is mapped.
    let npy = build(
        &t.path().join("n"),
        Preset::Leak4k,
        Dtype::F16,
        Out::Npy,
        &[("training", 6)],
    );
    let d = npy.join("training.npy.d");
    let mel = d.join("mel.npy");
    let full = std::fs::read(&mel).unwrap();
    std::fs::write(&mel, &full[..full.len() - 1]).unwrap();
    assert_refused(&d, &["mel.npy", "truncated or corrupt", "but the file has"]);
    // A header claiming an absurd shape: overflow, not an allocation.
    let mut huge = full.clone();
    let at = huge.windows(6).position(|w| w == b"(6, 79").unwrap();
    let longer = b"(99999999999999999, 79";
    huge.splice(at..at + 6, longer.iter().copied());
    // Keep the header's length: drop as many of its padding spaces.
    let pad = huge.iter().position(|&b| b == b'}').unwrap() + 1;
    huge.drain(pad..pad + longer.len() - 6);
    std::fs::write(&mel, &huge).unwrap();
    assert_refused(&d, &["mel.npy", "overflows"]);
    // A header that is not numpy's.
    let mut garbage = full.clone();
    garbage[0] = b'X';
    std::fs::write(&mel, &garbage).unwrap();
    assert_refused(&d, &["mel.npy", "not a .npy file"]);
    std::fs::write(&mel, &full).unwrap();
    // A label outside the label names.
    let label = d.join("label.npy");
    let labels = std::fs::read(&label).unwrap();
    let mut bad = labels.clone();
    let at = bad.len() - 8;
    bad[at..].copy_from_slice(&99i64.to_le_bytes());
    std::fs::write(&label, &bad).unwrap();
    assert_refused(&d, &["label 99", "outside the 5 label names"]);
    // A label file cut short.
    let short = labels[..labels.len() - 8].to_vec();
    std::fs::write(&label, short).unwrap();
    assert_refused(&d, &["label.npy", "truncated or corrupt"]);
    std::fs::write(&label, &labels).unwrap();
    // meta.json listing other paths.
    let meta_path = d.join("meta.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["paths"].as_array_mut().unwrap().pop();
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    assert_refused(&d, &["5 paths for 6 rows"]);
    std::fs::write(&meta_path, b"{ not json").unwrap();
    assert_refused(&d, &["meta.json", "not valid JSON"]);
}

#[test]
fn a_damaged_chunk_is_an_error_naming_it() {
    let t = tempfile::tempdir().unwrap();
    let dir = build(
        t.path(),
        Preset::Leak4k,
        Dtype::F16,
        CHUNKED,
        &[("training", 8)],
    );
    let h5 = dir.join("training.h5");
    // Find chunk 1's bytes through the library and overwrite its middle.
    let (addr, size) = {
        let f = hdf5::File::open(&h5).unwrap();
        let info = f.dataset("mel").unwrap().chunk_info(1).unwrap();
        (info.addr, info.size)
    };
    let file = std::fs::OpenOptions::new().write(true).open(&h5).unwrap();
    file.write_all_at(&[0xA5; 64], addr + size / 2).unwrap();
    drop(file);
    let split = Split::open(&h5).unwrap();
    let mut r = split.reader();
    let mut buf = vec![0.0; split.values_per_clip()];
    r.read_clip(0, &mut buf, None).unwrap();
    let e = r.read_clip(5, &mut buf, None).unwrap_err().to_string();
    assert!(e.contains("chunk 1 of mel"), "{e}");
}

#[test]
fn hdf5_files_with_inconsistent_or_foreign_content_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let write = |name: &str, f: &dyn Fn(&hdf5::File)| {
        let p = t.path().join(name);
        let file = hdf5::File::create(&p).unwrap();
        f(&file);
        drop(file);
        p
    };
    let names = |file: &hdf5::File| {
        let n: Vec<hdf5::types::VarLenUnicode> =
            ["a", "b"].iter().map(|s| s.parse().unwrap()).collect();
        file.new_attr_builder()
            .with_data(&n)
            .create("label_names")
            .unwrap();
    };
    let paths = |file: &hdf5::File, n: usize| {
        let p: Vec<hdf5::types::VarLenUnicode> =
            (0..n).map(|i| format!("x{i}").parse().unwrap()).collect();
        file.new_dataset_builder()
            .with_data(&p)
            .create("path")
            .unwrap();
    };
    // Labels for 3 clips, mel for 4.
    let p = write("rows.h5", &|f| {
        f.new_dataset_builder()
            .with_data(&ndarray::Array3::<f32>::zeros((4, 2, 3)))
            .create("mel")
            .unwrap();
        f.new_dataset_builder()
            .with_data(&[0i64, 1, 0])
            .create("label")
            .unwrap();
        paths(f, 4);
        names(f);
    });
    assert_refused(&p, &["label has shape [3]; [4] is expected"]);
    // f64 spectrograms are not something melctl writes.
    let p = write("f64.h5", &|f| {
        f.new_dataset_builder()
            .with_data(&ndarray::Array3::<f64>::zeros((1, 2, 3)))
            .create("mel")
            .unwrap();
    });
    assert_refused(&p, &["element type"]);
    // uint16 without saying bfloat16.
    let p = write("u16.h5", &|f| {
        f.new_dataset_builder()
            .with_data(&ndarray::Array3::<u16>::zeros((1, 2, 3)))
            .create("mel")
            .unwrap();
    });
    assert_refused(&p, &["uint16", "bfloat16"]);
    // Two axes only.
    let p = write("flat.h5", &|f| {
        f.new_dataset_builder()
            .with_data(&ndarray::Array2::<f32>::zeros((2, 3)))
            .create("mel")
            .unwrap();
    });
    assert_refused(&p, &["at least [clips, n_mels, frames]"]);
    // A well-formed minimal file (no mel_dims, config or statistics) opens, and its
    // statistics are computed.
    let p = write("ok.h5", &|f| {
        let mel = ndarray::Array3::<f32>::from_shape_fn((2, 2, 3), |(c, m, k)| {
            (c * 6 + m * 3 + k) as f32
        });
        f.new_dataset_builder()
            .with_data(&mel)
            .create("mel")
            .unwrap();
        f.new_dataset_builder()
            .with_data(&[0i64, 1])
            .create("label")
            .unwrap();
        paths(f, 2);
        names(f);
    });
    let s = Split::open(&p).unwrap();
    assert_eq!(
        s.clip(1).unwrap().as_slice().unwrap(),
        &[6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
    );
    let stats = s.stats(2).unwrap();
    assert_eq!(stats.mean, vec![4.0, 7.0]);
    assert_eq!(stats.count, 6);
}
