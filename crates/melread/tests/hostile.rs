//! Files built to deceive the reader (with h5py, as anyone could): links to elsewhere,
//! values stored outside the file, virtual datasets, storage never written, a sparse file
//! claiming a 128 GB clip, FIFOs and devices under the names the reader opens. Each is
//! refused with an error naming the file and why: never followed, never a hang, never an
//! abort, never values from somewhere else.

mod common;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use common::{Out, build, build_leak, python};
use melkit::{Dtype, Preset};
use melread::Split;

/// Writes the hostile HDF5 files into `dir` (argv[1]): each a well-formed melctl-like
/// split (mel, label, path, label_names) but for one thing.
const MAKE: &str = r#"
import os, sys
import h5py, numpy as np
d = sys.argv[1]
S = h5py.string_dtype()
def rest(f, rows=2, skip=()):
    if "label" not in skip:
        f.create_dataset("label", data=np.zeros(rows, "i8"))
    if "path" not in skip:
        f.create_dataset("path", data=[f"x{i}.wav" for i in range(rows)], dtype=S)
    f.attrs["label_names"] = np.array(["a", "b"], dtype=S)
def mel(f, rows=2):
    f.create_dataset("mel", data=np.ones((rows, 2, 3), "f4"))
with h5py.File(f"{d}/other.h5", "w") as f:
    f.create_dataset("mel", data=np.full((2, 2, 3), np.nan, "f4"))
with h5py.File(f"{d}/ok.h5", "w") as f:
    mel(f); rest(f)
with h5py.File(f"{d}/external_link.h5", "w") as f:
    rest(f)
    f["mel"] = h5py.ExternalLink("other.h5", "/mel")
with h5py.File(f"{d}/soft_link.h5", "w") as f:
    rest(f)
    f.create_dataset("elsewhere/mel", data=np.ones((2, 2, 3), "f4"))
    f["mel"] = h5py.SoftLink("/elsewhere/mel")
with h5py.File(f"{d}/unused_link.h5", "w") as f:
    mel(f); rest(f)
    f["extra"] = h5py.ExternalLink("other.h5", "/mel")
with h5py.File(f"{d}/external_mel.h5", "w") as f:
    rest(f)
    f.create_dataset("mel", shape=(2, 2, 3), dtype="f4", external=[("/etc/passwd", 0, 48)])
with h5py.File(f"{d}/external_label.h5", "w") as f:
    mel(f); rest(f, skip=("label",))
    f.create_dataset("label", shape=(2,), dtype="i8", external=[("/etc/passwd", 0, 16)])
with h5py.File(f"{d}/virtual.h5", "w") as f:
    rest(f)
    lay = h5py.VirtualLayout(shape=(2, 2, 3), dtype="f4")
    lay[:] = h5py.VirtualSource(f"{d}/other.h5", "mel", shape=(2, 2, 3))
    f.create_virtual_dataset("mel", lay, fillvalue=np.nan)
with h5py.File(f"{d}/unwritten_mel.h5", "w") as f:
    rest(f)
    f.create_dataset("mel", shape=(2, 2, 3), dtype="f4", fillvalue=np.nan)
with h5py.File(f"{d}/unwritten_label.h5", "w") as f:
    mel(f); rest(f, skip=("label",))
    f.create_dataset("label", shape=(2,), dtype="i8", fillvalue=1)
with h5py.File(f"{d}/missing_chunk.h5", "w") as f:
    rest(f, rows=4)
    ds = f.create_dataset("mel", shape=(4, 2, 3), dtype="f4", chunks=(1, 2, 3), fillvalue=np.nan)
    ds[0] = 1; ds[1] = 1; ds[3] = 1
with h5py.File(f"{d}/compact.h5", "w") as f:
    rest(f)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    ds = h5py.h5d.create(f.id, b"mel", h5py.h5t.IEEE_F32LE, h5py.h5s.create_simple((2, 2, 3)), dcpl=dcpl)
    ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ones((2, 2, 3), "f4"))
with h5py.File(f"{d}/huge_chunk.h5", "w") as f:
    mel(f); rest(f, skip=("label",))
    f.create_dataset("label", data=np.zeros(2, "i8"), chunks=((1 << 25) + 1,), maxshape=(None,),
                     compression="gzip", compression_opts=1)
for name, dtype, at in [("nan_f32", "f4", (1, 0, 2)), ("inf_f16", "f2", (0, 1, 1))]:
    with h5py.File(f"{d}/{name}.h5", "w") as f:
        m = np.ones((2, 2, 3), dtype)
        m[at] = np.nan if dtype == "f4" else np.inf
        f.create_dataset("mel", data=m); rest(f)
for name, mean, std in [("nan_mean", [0.0, np.nan], [1.0, 1.0]),
                        ("negative_std", [0.0, 0.0], [1.0, -1.0]),
                        ("inf_std", [0.0, 0.0], [np.inf, 1.0]),
                        ("tiny_std", [0.0, 0.0], [1.0, 1e-39]),
                        ("huge_mean", [1e39, 0.0], [1.0, 1.0])]:
    with h5py.File(f"{d}/{name}.h5", "w") as f:
        mel(f); rest(f)
        f.create_dataset("mel_mean", data=np.array(mean))
        f.create_dataset("mel_std", data=np.array(std))
        f.attrs["stats_count"] = np.uint64(12)
with h5py.File(f"{d}/long_path.h5", "w") as f:
    mel(f); rest(f, skip=("path",))
    f.create_dataset("path", data=["x.wav", "p" * 5000], dtype=S)
with h5py.File(f"{d}/long_label.h5", "w") as f:
    mel(f); rest(f)
    f.attrs["label_names"] = np.array(["a", "b" * 300], dtype=S)
with h5py.File(f"{d}/twice_label.h5", "w") as f:
    mel(f); rest(f)
    f.attrs["label_names"] = np.array(["a", "a"], dtype=S)
with h5py.File(f"{d}/future.h5", "w") as f:
    mel(f); rest(f)
    f.attrs["format_version"] = np.uint64(99)
with h5py.File(f"{d}/f16_says_bf16.h5", "w") as f:
    f.create_dataset("mel", data=np.ones((2, 2, 3), "f2")); rest(f)
    f["mel"].attrs["dtype"] = "bf16"
for name, v in [("version_int8", np.int8(-1)), ("version_float", np.float64(2.7)), ("version_bool", np.bool_(True))]:
    with h5py.File(f"{d}/{name}.h5", "w") as f:
        mel(f); rest(f)
        f.attrs["format_version"] = v
with h5py.File(f"{d}/bad_config.h5", "w") as f:
    mel(f); rest(f)
    f.attrs["config"] = "not json {"
# Storage reserved but never written: a sparse file of ~128 GB holding ~16 KB, whose one
# clip claims 32 x 1e9 values.
with h5py.File(f"{d}/sparse.h5", "w") as f:
    rest(f, rows=1)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    space = h5py.h5s.create_simple((1, 1, 1, 32, 10**9))
    h5py.h5d.create(f.id, b"mel", h5py.h5t.IEEE_F32LE, space, dcpl=dcpl)
"#;

fn make(dir: &Path) -> PathBuf {
    python(MAKE, &[dir.to_str().unwrap()]);
    dir.to_path_buf()
}

/// Opens `path` on another thread and reads every clip; the error, or a panic if it
/// opened and read whole or did not answer within 20 s (a hang).
fn refusal(path: &Path) -> String {
    let (tx, rx) = mpsc::channel();
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let r = Split::open(&p).and_then(|s| {
            for c in 0..s.clips() {
                s.clip(c)?;
            }
            Ok(s.clips())
        });
        let _ = tx.send(r);
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(Ok(clips)) => panic!("{} opened and read whole ({clips} clips)", path.display()),
        Ok(Err(e)) => e.to_string(),
        Err(_) => panic!("opening {} did not return within 20 s", path.display()),
    }
}

fn assert_refused(path: &Path, words: &[&str]) {
    let text = refusal(path);
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(text.contains(name), "{text:?} should name {name}");
    for w in words {
        assert!(text.contains(w), "{text:?} should say {w:?}");
    }
    assert_eq!(text.lines().count(), 1, "one line: {text:?}");
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

#[test]
fn links_are_refused_not_followed() {
    let t = tempfile::tempdir().unwrap();
    let d = make(t.path());
    assert!(
        Split::open(d.join("ok.h5")).is_ok(),
        "the control file opens"
    );
    assert_refused(&d.join("external_link.h5"), &["`mel` is an external link"]);
    assert_refused(&d.join("soft_link.h5"), &["`mel` is a soft link"]);
    // Even a link the reader would not use: a file with links is not melctl's.
    assert_refused(&d.join("unused_link.h5"), &["`extra` is an external link"]);
}

#[test]
fn values_from_outside_the_file_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let d = make(t.path());
    assert_refused(
        &d.join("external_mel.h5"),
        &["`mel` keeps its values outside this file", "/etc/passwd"],
    );
    assert_refused(
        &d.join("external_label.h5"),
        &["`label` keeps its values outside this file", "/etc/passwd"],
    );
    assert_refused(&d.join("virtual.h5"), &["`mel` is a virtual dataset"]);
    assert_refused(&d.join("compact.h5"), &["`mel` has compact storage"]);
}

#[test]
fn storage_never_written_is_refused_not_read_as_fill_values() {
    let t = tempfile::tempdir().unwrap();
    let d = make(t.path());
    assert_refused(&d.join("unwritten_mel.h5"), &["`mel` was never written"]);
    assert_refused(
        &d.join("unwritten_label.h5"),
        &["`label` was never written"],
    );
    assert_refused(
        &d.join("missing_chunk.h5"),
        &["`mel` has 3 of its 4 chunks", "never written"],
    );
}

#[test]
fn allocations_are_bounded_by_what_the_file_holds_and_melctl_writes() {
    let t = tempfile::tempdir().unwrap();
    let d = make(t.path());
    let sparse = d.join("sparse.h5");
    let len = std::fs::metadata(&sparse).unwrap().len();
    assert!(len > 100_000_000_000, "the sparse file claims {len} bytes");
    assert_refused(
        &sparse,
        &[
            "32000000000 values",
            "more than the 268435456 melctl writes",
        ],
    );
    // A chunk shape far beyond the data (deflated, so the file is small): reading two
    // labels would allocate a 256 MiB chunk (HDF5 allows 4 GiB).
    assert_refused(
        &d.join("huge_chunk.h5"),
        &["`label`'s chunks", "limit on a decoded chunk"],
    );
}

#[test]
fn values_and_statistics_melctl_never_stores_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let d = make(t.path());
    // A NaN or an infinity in `mel` is an error for the clip that holds it, whichever way
    // it is read: the clip, a segment, the loader, or statistics computed from the data.
    assert_refused(&d.join("nan_f32.h5"), &["clip 1", "not finite"]);
    assert_refused(&d.join("inf_f16.h5"), &["clip 0", "not finite"]);
    let split = std::sync::Arc::new(Split::open(d.join("nan_f32.h5")).unwrap());
    assert!(split.clip(0).is_ok(), "the finite clip reads");
    let e = split.segment(1, 0).unwrap_err().to_string();
    assert!(
        e.contains("clip 1 segment 0") && e.contains("not finite"),
        "{e}"
    );
    let e = split.compute_stats(2).unwrap_err().to_string();
    assert!(e.contains("not finite"), "{e}");
    let loader = melread::Loader::new(
        split.clone(),
        melread::LoaderOptions {
            batch_size: 2,
            ..melread::LoaderOptions::default()
        },
    )
    .unwrap();
    let e = loader
        .epoch(0)
        .find_map(|b| b.err())
        .expect("the loader stops at the NaN")
        .to_string();
    assert!(e.contains("not finite"), "{e}");
    // Statistics no normalisation can use are refused when the split opens.
    assert_refused(&d.join("nan_mean.h5"), &["mel_mean[1] is NaN"]);
    assert_refused(&d.join("negative_std.h5"), &["mel_std[1] is -1"]);
    assert_refused(&d.join("inf_std.h5"), &["mel_std[0] is inf"]);
    // Normalising by a std whose inverse overflows f32 gave infinities (train blamed the
    // learning rate), as would a mean beyond f32.
    assert_refused(&d.join("tiny_std.h5"), &["mel_std[1] is 1e-39"]);
    assert_refused(&d.join("huge_mean.h5"), &["mel_mean[0] is 1e39"]);
}

#[test]
fn strings_and_configurations_melctl_never_writes_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let d = make(t.path());
    assert_refused(
        &d.join("long_path.h5"),
        &["path 1 is 5000 bytes long", "more than the 4096"],
    );
    assert_refused(
        &d.join("long_label.h5"),
        &["label name 1 is 300 bytes long", "more than the 200"],
    );
    assert_refused(
        &d.join("twice_label.h5"),
        &["label names 0 and 1 are both \"a\""],
    );
    assert_refused(
        &d.join("bad_config.h5"),
        &["the `config` attribute is not the JSON melctl writes"],
    );
}

#[test]
fn tampered_npy_values_and_statistics_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let out = build(
        &t.path().join("n"),
        Preset::Speech16k,
        Dtype::F32,
        Out::Npy,
        &[("testing", 2)],
    );
    let d = out.join("testing.npy.d");
    assert!(
        Split::open(&d).unwrap().stored_stats().is_some(),
        "stats stored"
    );
    // The last value of the file (clip 1's) becomes NaN.
    let mel = d.join("mel.npy");
    let mut bytes = std::fs::read(&mel).unwrap();
    let n = bytes.len();
    bytes[n - 4..].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(&mel, &bytes).unwrap();
    let text = refusal(&d);
    assert!(
        text.contains("clip 1") && text.contains("not finite"),
        "{text}"
    );
    // A negative standard deviation in meta.json.
    let meta = d.join("meta.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    json["mel_std"][3] = serde_json::json!(-2.5);
    std::fs::write(&meta, serde_json::to_vec(&json).unwrap()).unwrap();
    let e = Split::open(&d).unwrap_err().to_string();
    assert!(e.contains("mel_std[3] is -2.5"), "{e}");
    // meta.json naming another dtype than mel.npy holds (f32 here).
    json["mel_std"][3] = serde_json::json!(2.5);
    for named in ["f16", "bf16"] {
        json["dtype"] = serde_json::json!(named);
        std::fs::write(&meta, serde_json::to_vec(&json).unwrap()).unwrap();
        let e = Split::open(&d).unwrap_err().to_string();
        assert!(
            e.contains("mel.npy holds f32") && e.contains("says otherwise"),
            "{e}"
        );
    }
}

#[test]
fn fifos_and_devices_are_refused_without_blocking() {
    let t = tempfile::tempdir().unwrap();
    // HDF5: a FIFO named like a split, opened by path and by split name.
    let fifo = t.path().join("training.h5");
    mkfifo(&fifo);
    assert_refused(&fifo, &["not a regular file (a FIFO)"]);
    let e = Split::open_in(t.path(), "training")
        .unwrap_err()
        .to_string();
    assert!(e.contains("training.h5") && e.contains("a FIFO"), "{e}");
    // npy: each of the folder's three files in turn is a FIFO, then meta.json is a link
    // to /dev/zero (an endless read if the bound trusted st_size), then to a real
    // meta.json elsewhere.
    let out = build(
        &t.path().join("n"),
        Preset::Speech16k,
        Dtype::F16,
        Out::Npy,
        &[("testing", 2)],
    );
    let d = out.join("testing.npy.d");
    for name in ["meta.json", "mel.npy", "label.npy"] {
        let f = d.join(name);
        let keep = t.path().join(name);
        std::fs::rename(&f, &keep).unwrap();
        mkfifo(&f);
        let text = refusal(&d);
        assert!(
            text.contains(name) && text.contains("not a regular file (a FIFO)"),
            "{name}: {text}"
        );
        std::fs::remove_file(&f).unwrap();
        std::fs::rename(&keep, &f).unwrap();
    }
    assert!(Split::open(&d).is_ok(), "the restored folder opens");
    let meta = d.join("meta.json");
    let elsewhere = t.path().join("elsewhere.json");
    std::fs::rename(&meta, &elsewhere).unwrap();
    // A link is refused before anything is read through it (meta.json as mel.npy and
    // label.npy: a link to another folder's meta.json renamed the classes, exit 0).
    std::os::unix::fs::symlink("/dev/zero", &meta).unwrap();
    let text = refusal(&d);
    assert!(
        text.contains("meta.json") && text.contains("a link"),
        "{text}"
    );
    std::fs::remove_file(&meta).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &meta).unwrap();
    let text = refusal(&d);
    assert!(
        text.contains("meta.json") && text.contains("a link"),
        "{text}"
    );
}

/// A mapped split truncated by another process while it is read (`cp` or `rsync
/// --inplace` over it) raised SIGBUS: the train example died with "Bus error" (exit 135)
/// and no word. With [`melread::sigbus::exit_on_sigbus`] (which the train example and
/// melctl install) it is one line and exit 74. Run in a child process: this test's
/// binary, asked by an environment variable to be the reader.
#[test]
fn a_split_truncated_while_mapped_is_one_line_and_an_exit_code_not_a_bus_error() {
    const CHILD: &str = "MELREAD_TEST_SIGBUS_SPLIT";
    if let Some(path) = std::env::var_os(CHILD) {
        melread::sigbus::exit_on_sigbus(melread::sigbus::DEFAULT_MESSAGE, 74);
        let split = std::sync::Arc::new(Split::open(&path).unwrap());
        assert!(
            matches!(split.access(), melread::Access::Map),
            "{:?}",
            split.access()
        );
        let opts = melread::LoaderOptions {
            batch_size: 4,
            ..Default::default()
        };
        let loader = melread::Loader::new(split, opts).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4096)
            .unwrap();
        // The loader looks at the file once a batch, after reading it: its first read past
        // the new end faults.
        for b in loader.epoch(0) {
            let _ = b;
        }
        panic!("every batch read after the truncation");
    }
    let t = tempfile::tempdir().unwrap();
    let out = build_leak(&t.path().join("o"), Dtype::F32, &[("training", 20)]);
    let o = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_split_truncated_while_mapped_is_one_line_and_an_exit_code_not_a_bus_error",
            "--nocapture",
        ])
        .env(CHILD, out.join("training.h5"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(74), "{:?}: {err}", o.status);
    assert!(
        err.contains("a memory-mapped dataset changed while it was read"),
        "{err}"
    );
}

/// An output folder given where a split goes is told apart from a damaged npy split
/// ("meta.json: cannot read"), with the splits it holds.
#[test]
fn an_output_folder_given_for_a_split_names_its_splits() {
    let t = tempfile::tempdir().unwrap();
    let out = build(
        &t.path().join("o"),
        Preset::Speech16k,
        Dtype::F16,
        Out::Hdf5 {
            chunk_clips: 0,
            gzip: 0,
        },
        &[("training", 2), ("testing", 2)],
    );
    let e = Split::open(&out).unwrap_err().to_string();
    assert!(
        e.contains("no npy split") && e.contains("testing.h5, training.h5"),
        "{e}"
    );
}

/// An npy split's files must be its own: a link to a file elsewhere, or bytes past the
/// data (a sparse 10 GB tail), were read without complaint.
#[test]
fn npy_files_that_are_links_or_run_past_their_data_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let out = build(
        &t.path().join("n"),
        Preset::Speech16k,
        Dtype::F32,
        Out::Npy,
        &[("testing", 2)],
    );
    let d = out.join("testing.npy.d");
    let mel = d.join("mel.npy");
    let elsewhere = t.path().join("elsewhere.npy");
    std::fs::rename(&mel, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &mel).unwrap();
    let text = refusal(&d);
    assert!(
        text.contains("mel.npy") && text.contains("a link"),
        "{text}"
    );
    std::fs::remove_file(&mel).unwrap();
    std::fs::rename(&elsewhere, &mel).unwrap();
    assert!(Split::open(&d).is_ok(), "restored");
    let len = std::fs::metadata(&mel).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&mel)
        .unwrap()
        .set_len(len + (10 << 30))
        .unwrap();
    let text = refusal(&d);
    assert!(text.contains("10737418240 bytes follow the data"), "{text}");
}

/// Every output carries the format version it was written in, and a reader refuses a
/// version it does not know by name (not as damage); files from before the version are
/// read as version 1.
#[test]
fn the_format_version_is_written_and_checked() {
    let t = tempfile::tempdir().unwrap();
    let d = make(t.path());
    assert_refused(
        &d.join("future.h5"),
        &["format_version 99, which this melctl does not read"],
    );
    assert!(
        Split::open(d.join("ok.h5")).is_ok(),
        "no version: version 1"
    );
    assert_refused(
        &d.join("f16_says_bf16.h5"),
        &["mel is stored as f16", "says otherwise"],
    );
    // HDF5 converts on read: -1 as int8 read as 0, 2.7 as 2, true as 1. Only the unsigned
    // integer melctl writes is a version.
    for name in ["version_int8", "version_float", "version_bool"] {
        assert_refused(
            &d.join(format!("{name}.h5")),
            &["format_version attribute is not an unsigned whole number"],
        );
    }
    for out in [
        Out::Hdf5 {
            chunk_clips: 0,
            gzip: 0,
        },
        Out::Npy,
    ] {
        let o = build(
            &t.path().join(format!("v{}", matches!(out, Out::Npy))),
            Preset::Speech16k,
            Dtype::F16,
            out,
            &[("testing", 2)],
        );
        let (file, read) = if o.join("testing.h5").exists() {
            (
                o.join("testing.h5"),
                "import h5py,sys; print(int(h5py.File(sys.argv[1]).attrs['format_version']))",
            )
        } else {
            (
                o.join("testing.npy.d/meta.json"),
                "import json,sys; print(json.load(open(sys.argv[1]))['format_version'])",
            )
        };
        let v = python(read, &[file.to_str().unwrap()]);
        assert_eq!(
            v.trim(),
            mel_core::format::VERSION.to_string(),
            "{}",
            file.display()
        );
    }
}

/// Metadata a file may claim (issue 37): each hostile variant of the `meta` group and the
/// `meta_columns` attribute beside one well-formed file.
const MAKE_META: &str = r#"
import sys
import h5py, numpy as np
d = sys.argv[1]
S = h5py.string_dtype()
def split(name, columns=("speaker",), values=None, attr=True):
    f = h5py.File(f"{d}/{name}.h5", "w")
    f.create_dataset("mel", data=np.ones((2, 2, 3), "f4"))
    f.create_dataset("label", data=np.zeros(2, "i8"))
    f.create_dataset("path", data=["x0.wav", "x1.wav"], dtype=S)
    f.attrs["label_names"] = np.array(["a", "b"], dtype=S)
    if attr:
        f.attrs["meta_columns"] = np.array(list(columns), dtype=S)
    if values is not None:
        for c in columns:
            f.create_dataset(f"meta/{c}", data=values, dtype=S)
    return f
split("meta_ok", values=["ann", "bob"]).close()
split("meta_missing").close()
split("meta_short", values=["ann"]).close()
split("meta_long", values=["ann", "b" * 2000]).close()
split("meta_escape", values=["ann", "\x1b[2J"]).close()
split("meta_own_name", columns=("split",), values=["a", "b"]).close()
split("meta_twice", columns=("speaker", "speaker"), attr=True).close()
f = split("meta_link")
f.create_dataset("elsewhere", data=["ann", "bob"], dtype=S)
f["meta/speaker"] = h5py.SoftLink("/elsewhere")
f.close()
f = split("meta_not_utf8")
f.create_dataset("meta/speaker", data=np.array([b"ann", b"\xff\xfe"], dtype=object), dtype=h5py.string_dtype("utf-8"))
f.close()
f = split("path_not_utf8", values=["ann", "bob"])
del f["path"]
f.create_dataset("path", data=np.array([b"x.wav", b"\xff\xfe"], dtype=object), dtype=h5py.string_dtype("ascii"))
f.close()
f = split("meta_extra", values=["ann", "bob"])
f.create_dataset("meta/hidden", data=["a", "b"], dtype=S)
f.close()
split("meta_no_columns", values=["ann", "bob"], attr=False).close()
f = split("meta_external")
f.create_dataset("meta/speaker", shape=(2,), dtype="i8", external=[("/etc/passwd", 0, 16)])
f.close()
"#;

#[test]
fn metadata_a_file_claims_is_checked_before_it_is_believed() {
    let t = tempfile::tempdir().unwrap();
    python(MAKE_META, &[t.path().to_str().unwrap()]);
    let d = t.path();
    let ok = Split::open(d.join("meta_ok.h5")).unwrap();
    assert_eq!(ok.meta_columns(), ["speaker"]);
    assert_eq!(ok.metadata().column("speaker").unwrap(), ["ann", "bob"]);
    assert_eq!(ok.clip_meta(1), ["bob"]);
    assert_refused(&d.join("meta_missing.h5"), &["`meta` is not a group"]);
    assert_refused(
        &d.join("meta_short.h5"),
        &["meta/speaker has shape [1]; [2] is expected"],
    );
    assert_refused(&d.join("meta_long.h5"), &["clip 1", "the limit is 1024"]);
    assert_refused(&d.join("meta_escape.h5"), &["clip 1", "control character"]);
    assert_refused(
        &d.join("meta_own_name.h5"),
        &["metadata column", "own columns"],
    );
    assert_refused(&d.join("meta_twice.h5"), &["\"speaker\" is named twice"]);
    assert_refused(&d.join("meta_link.h5"), &["`speaker` is a soft link"]);
    assert_refused(
        &d.join("meta_external.h5"),
        &["keeps its values outside this file"],
    );
    // Bytes that are not UTF-8 were undefined behaviour (the library's `as_str`), then an
    // abort: every string from a file is checked (attack round, issue 37).
    assert_refused(
        &d.join("meta_not_utf8.h5"),
        &["meta/speaker 1 is not UTF-8 text"],
    );
    assert_refused(&d.join("path_not_utf8.h5"), &["path 1 is not UTF-8 text"]);
    // Metadata the columns do not name is not silently ignored.
    assert_refused(
        &d.join("meta_extra.h5"),
        &["`meta/hidden` is not one of the columns"],
    );
    assert_refused(
        &d.join("meta_no_columns.h5"),
        &["without the `meta_columns` attribute"],
    );
}

/// A mapped split changed without a fault: truncated within the map's last page (the cut
/// bytes read as zeros) or cut anywhere after `mel`, or overwritten in place (new bytes
/// under the map). Read on, it gave zeros or the new file's values with no word (found by an
/// attack, 2026-11-30); now the loader's next batch, and a clip read through the split,
/// are the one-line "changed while it was read", and what was read before stands.
#[test]
fn a_mapped_split_changed_without_a_fault_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let out = build_leak(&t.path().join("o"), Dtype::F16, &[("training", 24)]);
    let path = out.join("training.h5");
    let pristine = std::fs::read(&path).unwrap();
    /// A way of changing the file at a path, and its name.
    type Change<'a> = (&'a str, &'a dyn Fn(&Path));
    let changes: [Change<'_>; 3] = [
        ("cut by 100 bytes", &|p| {
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(pristine.len() as u64 - 100).unwrap();
        }),
        ("the same bytes written over it", &|p| {
            std::fs::write(p, &pristine).unwrap();
        }),
        ("one byte changed in place", &|p| {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.write_all_at(
                &[pristine[pristine.len() / 2] ^ 1],
                pristine.len() as u64 / 2,
            )
            .unwrap();
        }),
    ];
    for (what, change) in changes {
        std::fs::write(&path, &pristine).unwrap();
        let split = std::sync::Arc::new(Split::open(&path).unwrap());
        assert!(matches!(split.access(), melread::Access::Map), "{what}");
        let opts = melread::LoaderOptions {
            batch_size: 4,
            workers: 1,
            prefetch: 1,
            ..Default::default()
        };
        let loader = melread::Loader::new(split.clone(), opts).unwrap();
        let mut batches = loader.epoch(0);
        assert!(batches.next().unwrap().is_ok(), "{what}: the first batch");
        assert!(split.clip(0).is_ok(), "{what}: a clip before the change");
        // Past the file system clock's tick, so that the change moves the time of
        // modification.
        std::thread::sleep(Duration::from_millis(30));
        change(&path);
        let refused = |e: String| e.contains("changed while it was read") && !e.contains('\n');
        let e = split.clip(1).unwrap_err().to_string();
        assert!(refused(e.clone()), "{what}: a clip: {e}");
        // Batches filled ahead of the change may come first (prefetch).
        let errors: Vec<String> = batches
            .filter_map(|b| b.err())
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.first().is_some_and(|e| refused(e.clone())),
            "{what}: the loader: {errors:?}"
        );
    }
}
