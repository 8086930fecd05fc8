//! Attacks on melctl's promise: a build either writes complete, correct outputs or exits
//! non-zero saying why, and never leaves a broken file at a final path. Each test is
//! one class of attack from issue 13, run against the real binary (ARCHITECTURE.md,
//! "Integrity", maps each promise to its test). Where a capability is missing (strace,
//! root for a tmpfs) the test prints why it is skipped.

mod util;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use util::{Dir, SHORT_CLIPS, TestCommand};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `melctl build` of `data/` into `out` with the short-clip config, the CPU backend and
/// `extra` arguments.
fn build(dir: &Dir, out: &str, extra: &[&str]) -> TestCommand {
    let mut c = dir.melctl();
    c.args(["build", "-i", "data", "-o", out, "--config", "short.toml"])
        .args(["--backend", "cpu", "--loader", "preload"])
        .args(extra);
    c
}

/// The argument list of `melctl build` of `data/` into `out` with the short-clip config
/// and the CPU backend, then `extra` (for runs under strace).
fn build_argv<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let base = ["build", "-i", "data", "-o", "out", "--config", "short.toml"];
    base.iter()
        .chain(&["--backend", "cpu"])
        .chain(extra)
        .copied()
        .collect()
}

/// `mel` (as f16 bits), `label` and `path` of an HDF5 output, or why it does not open
/// complete (the three datasets with the same row count).
/// An output's `mel` (f16 bits), `label` and `path`.
type Contents = (Vec<u16>, Vec<i64>, Vec<String>);

fn read_h5(path: &Path) -> Result<Contents, String> {
    let f = hdf5::File::open(path).map_err(|e| e.to_string())?;
    let mel = f.dataset("mel").map_err(|e| e.to_string())?;
    let rows = mel.shape().first().copied().unwrap_or(0);
    let bits: Vec<half::f16> = mel.read_raw().map_err(|e| e.to_string())?;
    let label: Vec<i64> = f
        .dataset("label")
        .and_then(|d| d.read_raw())
        .map_err(|e| e.to_string())?;
    let paths: Vec<hdf5::types::VarLenUnicode> = f
        .dataset("path")
        .and_then(|d| d.read_raw())
        .map_err(|e| e.to_string())?;
    if label.len() != rows || paths.len() != rows {
        return Err(format!(
            "{rows} rows of mel, {} labels, {} paths",
            label.len(),
            paths.len()
        ));
    }
    Ok((
        bits.iter().map(|x| x.to_bits()).collect(),
        label,
        paths.iter().map(|p| p.to_string()).collect(),
    ))
}

/// Entries of `dir` whose names say they are temporaries.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".partial-") || n.ends_with(".resume"))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether strace can inject faults here; prints why not.
fn strace() -> bool {
    let ok = std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("skipped: strace is not installed (scripts/setup.sh installs it)");
    }
    ok
}

/// `cmd` under strace with a fault injected; returns the output.
fn under_strace(dir: &Dir, cmd: &[&str], inject: &str) -> Output {
    let mut c = dir.program("strace");
    // Injection acts on traced calls: trace the injected one (to a file of the test's
    // folder, never to the system's /dev/null).
    let call = inject
        .trim_start_matches("inject=")
        .split(':')
        .next()
        .unwrap_or("none");
    let trace = format!("trace={call}");
    let log = dir.join("strace.log");
    c.args(["-f", "-qq", "-o"])
        .arg(&log)
        .args(["-e", &trace, "-e", inject])
        .arg(env!("CARGO_BIN_EXE_melctl"))
        .args(cmd);
    c.output()
}

const SPLITS: [&str; 3] = ["testing", "training", "validation"];

#[test]
fn a_kill_at_every_sync_point_leaves_the_previous_output_or_a_complete_new_one() {
    if !strace() {
        return;
    }
    let dir = Dir::demo(9);
    dir.create(
        "nosync.toml",
        format!("{SHORT_CLIPS}[output]\nfsync = false\n"),
    );
    dir.create(
        "chunked.toml",
        format!("{SHORT_CLIPS}[hdf5]\nchunk_clips = 2\ngzip = 1\n"),
    );
    for config in ["short.toml", "nosync.toml", "chunked.toml"] {
        let args = |out: &str| -> Vec<String> {
            ["build", "-i", "data", "-o", out, "--config", config]
                .iter()
                .map(|s| s.to_string())
                .chain(["--backend", "cpu"].map(String::from))
                .collect()
        };
        // The reference output, and the previous output every killed run must leave
        // (or replace with a complete new one: the same values).
        let a: Vec<String> = args("ref");
        dir.melctl().args(&a).stdout();
        let reference: Vec<_> = SPLITS
            .iter()
            .map(|s| read_h5(&dir.join(format!("ref/{s}.h5"))).unwrap())
            .collect();
        for call in [
            "fsync",
            "fdatasync",
            "renameat",
            "rename",
            "sync_file_range",
        ] {
            for n in 1.. {
                let _ = std::fs::remove_dir_all(dir.join("out"));
                std::fs::create_dir(dir.join("out")).unwrap();
                for s in SPLITS {
                    std::fs::copy(
                        dir.join(format!("ref/{s}.h5")),
                        dir.join(format!("out/{s}.h5")),
                    )
                    .unwrap();
                }
                let a = args("out");
                let a: Vec<&str> = a.iter().map(String::as_str).collect();
                let o = under_strace(&dir, &a, &format!("inject={call}:signal=KILL:when={n}"));
                if o.status.success() {
                    break; // fewer than n such calls: every point was tried
                }
                for (s, want) in SPLITS.iter().zip(&reference) {
                    let got = read_h5(&dir.join(format!("out/{s}.h5")));
                    assert!(
                        got.as_ref() == Ok(want),
                        "{config}: killed at {call} #{n}: out/{s}.h5 is {}\n{}",
                        match &got {
                            Ok(_) => "complete but different".to_string(),
                            Err(e) => e.clone(),
                        },
                        dir.listing()
                    );
                }
                // The next run cleans what the killed one left.
                assert!(n < 100, "{call}: no end");
            }
        }
        // Killed runs' temporaries are removed by the next build.
        dir.melctl().args(args("out")).stdout();
        assert_eq!(leftovers(&dir.join("out")), Vec::<String>::new());
    }
}

#[test]
fn a_failed_write_at_any_point_is_an_error_and_nothing_reaches_a_final_path() {
    if !strace() {
        return;
    }
    let dir = Dir::demo(9);
    // The npy sink's rows and headers (pwrite64 in melctl's own code), every one in turn
    // (strace counts each thread's calls: `when=N` fails the N-th of every thread).
    let mut failures = 0;
    for n in 1.. {
        let _ = std::fs::remove_dir_all(dir.join("out"));
        let cmd = build_argv(&["--sink", "npy"]);
        let o = under_strace(
            &dir,
            &cmd,
            &format!("inject=pwrite64:error=ENOSPC:when={n}"),
        );
        if o.status.success() {
            break; // past every thread's last write
        }
        failures += 1;
        let err = text(&o.stderr);
        assert!(
            err.contains("No space left on device") && o.status.code() == Some(1),
            "write #{n}: {err}"
        );
        let names = dir.names("out");
        assert!(
            names.iter().all(|n| !n.ends_with(".npy.d")),
            "write #{n} failed, yet {names:?} were published"
        );
        assert_eq!(
            leftovers(&dir.join("out")),
            Vec::<String>::new(),
            "write #{n}"
        );
    }
    assert!(failures >= 3, "only {failures} writes were tried");
    // HDF5 files reserve their space before the library writes: a full disk is refused
    // there, cleanly, for every split in turn.
    for n in 1..=3 {
        let _ = std::fs::remove_dir_all(dir.join("out"));
        let cmd = build_argv(&[]);
        let o = under_strace(
            &dir,
            &cmd,
            &format!("inject=fallocate:error=ENOSPC:when={n}"),
        );
        let err = text(&o.stderr);
        assert!(
            o.status.code() == Some(1) && err.contains("reserving disk space"),
            "fallocate #{n}: {err}"
        );
        assert!(dir.names("out").iter().all(|n| !n.ends_with(".h5")));
        assert_eq!(leftovers(&dir.join("out")), Vec::<String>::new());
    }
}

/// Mounts a tmpfs of `kib` KiB at `at` (root only).
fn mount_tmpfs(at: &Path, kib: usize) -> bool {
    std::fs::create_dir_all(at).unwrap();
    std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
        .arg(at)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_full_disk_at_every_page_is_an_error_or_a_complete_output() {
    let dir = Dir::demo(4);
    let mnt = dir.join("mnt");
    if !mount_tmpfs(&mnt, 4096) {
        println!("skipped: cannot mount a tmpfs (needs root)");
        return;
    }
    // How much a build writes, then a disk that much full, page by page.
    build(&dir, "mnt/probe", &["--split", "training"]).stdout();
    let used: u64 = std::fs::read_dir(mnt.join("probe"))
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    std::fs::remove_dir_all(mnt.join("probe")).unwrap();
    let free = |m: &Path| {
        let s = nix_statvfs(m);
        s.0 * s.1
    };
    let page = 4096u64;
    let total_free = free(&mnt);
    // The build reserves its output's size plus a metadata bound before writing.
    let reserved = used + (256 << 10) + 4 * 512;
    let pages = reserved.div_ceil(page) + 8;
    let mut outcomes = (0, 0);
    for left in 0..=pages {
        let filler = mnt.join("filler");
        let fill = total_free.saturating_sub(left * page);
        std::fs::write(&filler, vec![1u8; fill as usize]).unwrap_or(());
        let _ = std::fs::remove_dir_all(mnt.join("out"));
        let mut c = build(&dir, "mnt/out", &["--split", "training"]);
        let o = c.output();
        if o.status.success() {
            outcomes.0 += 1;
            c.check(
                &o,
                read_h5(&mnt.join("out/training.h5")).is_ok(),
                &format!("{left} pages free: exit 0 but the output does not read back"),
            );
        } else {
            outcomes.1 += 1;
            let names = dir.names("mnt/out");
            c.check(
                &o,
                names.iter().all(|n| !n.ends_with(".h5")),
                &format!("{left} pages free: failed, yet published {names:?}"),
            );
        }
        let _ = std::fs::remove_dir_all(mnt.join("out"));
        std::fs::remove_file(&filler).unwrap();
    }
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    println!(
        "disk full: {} runs succeeded, {} failed cleanly",
        outcomes.0, outcomes.1
    );
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
}

/// (block size, free blocks) of the filesystem holding `p`.
fn nix_statvfs(p: &Path) -> (u64, u64) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid path and a zeroed struct the call fills.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(c.as_ptr(), &mut s), 0);
        (s.f_frsize as u64, s.f_bavail as u64)
    }
}

#[test]
fn misplaced_audio_is_refused_by_name_and_nothing_is_written() {
    let dir = Dir::demo(10);
    dir.create("data/training/stray.wav", b"RIFF");
    let err = build(&dir, "out", &[]).stderr_of_failure();
    assert!(
        err.contains("training/stray.wav") && err.contains("directly in a split folder"),
        "{err}"
    );
    assert!(dir.names("out").is_empty());
    std::fs::remove_file(dir.join("data/training/stray.wav")).unwrap();
    dir.create("data/training/leak/deeper/x.wav", b"RIFF");
    let err = build(&dir, "out", &[]).stderr_of_failure();
    assert!(
        err.contains("leak/deeper/x.wav") && err.contains("below a class"),
        "{err}"
    );
}

#[test]
fn a_fifo_named_wav_is_a_failure_of_its_own_and_the_build_finishes() {
    let dir = Dir::demo(5);
    let fifo = dir.join("data/training/leak/zz.wav");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    for loader in ["preload", "stream"] {
        let mut cmd = dir.melctl();
        cmd.args([
            "build",
            "-i",
            "data",
            "-o",
            loader,
            "--config",
            "short.toml",
        ])
        .args(["--backend", "cpu", "--loader", loader]);
        let start = Instant::now();
        let mut child = cmd
            .command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        while child.try_wait().unwrap().is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{loader}: the build hangs on a FIFO"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let o = child.wait_with_output().unwrap();
        cmd.check(&o, o.status.success(), "the build finishes");
        let out = text(&o.stdout);
        assert!(
            out.contains("zz.wav") && out.contains("not a regular file (a FIFO)"),
            "{out}"
        );
    }
}

/// An interrupt while the splits are computed stops the build within two seconds, exit
/// 130, nothing published. The signal is sent once the build says what it reads (the scan
/// and the checks are done): a fixed delay landed in the scan on a loaded machine, whose
/// length depends on the disk, not on melctl.
#[test]
fn an_interrupt_stops_the_build_within_two_seconds_with_exit_130() {
    use std::io::BufRead;
    let dir = Dir::demo(150);
    for loader in ["preload", "stream"] {
        let mut cmd = dir.melctl();
        cmd.args(["build", "-i", "data", "-o", "out", "--threads", "1"])
            .args(["--backend", "cpu"])
            .args([
                "--loader",
                if loader == "stream" {
                    "stream"
                } else {
                    "preload"
                },
            ]);
        let mut child = cmd
            .command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut said = String::new();
        // Read here, and kept open to the end: melctl's stderr must stay writable.
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        while !said.contains("per clip") {
            if stderr.read_line(&mut said).unwrap() == 0 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let sent = Instant::now();
        let o = child.wait_with_output().unwrap();
        let took = sent.elapsed();
        std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();
        cmd.check(
            &o,
            o.status.code() == Some(130),
            &format!("{loader}: exit 130 ({said})"),
        );
        assert!(
            took < Duration::from_secs(2),
            "{loader}: stopped after {took:?}"
        );
        assert!(
            dir.names("out").iter().all(|n| !n.ends_with(".h5")),
            "{:?}",
            dir.names("out")
        );
    }
}

#[test]
fn headers_and_settings_that_would_need_gigabytes_are_refused_without_aborting() {
    let dir = Dir::demo(5);
    // A 2 KB WAV that says 4,294,967,295 Hz.
    let mut w = b"RIFF\x00\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00".to_vec();
    w.extend_from_slice(&u32::MAX.to_le_bytes());
    w.extend_from_slice(&u32::MAX.to_le_bytes());
    w.extend_from_slice(b"\x02\x00\x10\x00data\xd0\x07\x00\x00");
    w.resize(w.len() + 2000, 0);
    let riff = (w.len() - 8) as u32;
    w[4..8].copy_from_slice(&riff.to_le_bytes());
    dir.create("data/training/leak/zz-huge-rate.wav", &w);
    let out = build(&dir, "out", &[]).stdout();
    assert!(
        out.contains("zz-huge-rate.wav") && out.contains("above the limit"),
        "{out}"
    );
    for (toml, field) in [
        ("[mel]\nn_mels = 100000000\n", "mel.n_mels"),
        ("[run]\nqueue_depth = 1000000000\n", "run.queue_depth"),
        (
            "[segment]\nlong = { window = 1024, hop = 1 }\nshort = { window = 512, hop = 1 }\n",
            "segment",
        ),
        ("[audio]\nclip_seconds = 65536.0\n", "segment"),
        (
            "[mel]\nn_fft = 16777216\npad_mode = \"constant\"\nwin_length = 512\n",
            "mel.n_fft",
        ),
        ("[run]\nthreads = 5000\n", "run.threads"),
        ("[run]\nbatch_clips = 1000000\n", "run.batch_clips"),
    ] {
        dir.create("bad.toml", toml);
        let mut c = dir.melctl();
        c.args(["build", "-i", "data", "-o", "bad", "--config", "bad.toml"]);
        let o = c.output();
        c.check(
            &o,
            o.status.code() == Some(1) && text(&o.stderr).contains(field),
            &format!("{toml}: exit 1 naming {field}"),
        );
    }
}

#[test]
fn manifest_names_cannot_escape_the_output_folder() {
    let dir = Dir::demo(5);
    let wav = std::fs::read_dir(dir.join("data/training/leak"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    dir.create("m/a.wav", std::fs::read(&wav).unwrap());
    for (manifest, text_) in [
        ("m/x.csv", "path,label,split\na.wav,leak,../escaped\n"),
        ("m/y.csv", "path,label,split\na.wav,leak,/tmp/anywhere\n"),
        (
            "m/z.jsonl",
            "{\"path\": \"a.wav\", \"label\": \"le\\u0000ak\", \"split\": \"t\"}\n",
        ),
    ] {
        dir.create(manifest, text_);
        let err = dir
            .melctl()
            .args(["build", "--manifest", manifest, "-o", "out/inner"])
            .stderr_of_failure();
        assert!(err.contains("line "), "{manifest}: {err}");
        assert!(!dir.join("out/escaped.h5").exists() && !dir.join("escaped.h5").exists());
    }
}

#[test]
fn a_second_build_of_the_same_output_is_refused_naming_the_first() {
    let dir = Dir::demo(120);
    let mut first = dir.melctl();
    first
        .args(["build", "-i", "data", "-o", "out", "--threads", "1"])
        .args(["--backend", "cpu"]);
    let child = first
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(300));
    let err = dir
        .melctl()
        .args(["build", "-i", "data", "-o", "out", "--backend", "cpu"])
        .stderr_of_failure();
    assert!(
        err.contains(&format!("process {pid}")) && err.contains("is using this folder"),
        "{err}"
    );
    let o = child.wait_with_output().unwrap();
    first.check(&o, o.status.success(), "the first build completes");
    for s in SPLITS {
        read_h5(&dir.join(format!("out/{s}.h5"))).unwrap();
    }
}

#[test]
fn on_error_fail_leaves_every_previous_output_exactly_as_it_was() {
    let dir = Dir::demo(10);
    build(&dir, "out", &[]).stdout();
    let before: Vec<Vec<u8>> = SPLITS
        .iter()
        .map(|s| std::fs::read(dir.join(format!("out/{s}.h5"))).unwrap())
        .collect();
    // A bad file in the last split built (sorted: testing, training, validation).
    dir.create("data/validation/leak/zz-bad.wav", b"not audio");
    let err = build(&dir, "out", &["--on-error", "fail", "--report", "r.json"]).stderr_of_failure();
    assert!(err.contains("zz-bad.wav"), "{err}");
    for (s, b) in SPLITS.iter().zip(&before) {
        assert!(
            &std::fs::read(dir.join(format!("out/{s}.h5"))).unwrap() == b,
            "{s}.h5 changed"
        );
    }
    // The failed build's report says so.
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    assert_eq!(r["ok"], false);
    assert_eq!(r["published"], false);
    assert!(r["error"].as_str().unwrap().contains("zz-bad.wav"));
}

#[test]
fn a_report_that_cannot_be_written_is_found_before_any_work() {
    let dir = Dir::demo(5);
    let start = Instant::now();
    let err = build(&dir, "out", &["--report", "no/such/folder/r.json"]).stderr_of_failure();
    assert!(err.contains("cannot write the report"), "{err}");
    assert!(!dir.join("out").exists(), "nothing was built");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn resume_assembles_in_bounded_memory_and_leaves_no_journal() {
    // 1,400 full-length leak-4k clips (106 MB of f16 spectrograms): an assembly that held
    // the split would add ~100 MB over the same build without --resume. Batches of 16
    // keep the streaming loader's own bound (a fixed number of batches) small.
    let dir = Dir::demo(1400);
    let peak = |out: &str, resume: bool| -> u64 {
        let report = format!("{out}.json");
        let mut c = dir.melctl();
        c.args(["build", "-i", "data", "-o", out, "--backend", "cpu"])
            .args(["--loader", "stream", "--batch", "16", "--report", &report]);
        if resume {
            c.arg("--resume");
        }
        c.stdout();
        assert_eq!(leftovers(&dir.join(out)), Vec::<String>::new());
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(&report)).unwrap()).unwrap();
        r["peak_rss_bytes"].as_u64().unwrap()
    };
    let plain = peak("plain", false);
    let resumed = peak("resumed", true);
    println!("peak memory, 1,400 clips: {plain} B, with --resume {resumed} B");
    // The journal's own buffers and the pages it maps cost tens of MB at most (19 MB
    // measured on a 2-core CI machine); holding the split would cost over 100 MB.
    assert!(
        resumed < plain + (50 << 20),
        "--resume holds more: {plain} -> {resumed}"
    );
    // A resume of a finished build keeps every split and leaves no journal either.
    let again = dir
        .melctl()
        .args([
            "build",
            "-i",
            "data",
            "-o",
            "resumed",
            "--backend",
            "cpu",
            "--resume",
        ])
        .stdout();
    assert!(again.contains("total"), "{again}");
    assert_eq!(leftovers(&dir.join("resumed")), Vec::<String>::new());
}

#[test]
fn skipped_clips_leave_the_output_no_larger_than_its_contents() {
    let dir = Dir::demo(10);
    dir.create("data/training/leak/zz-bad.wav", b"not audio");
    build(&dir, "out", &["--dtype", "f32"]).stdout();
    let (bits, label, _) = read_h5(&dir.join("out/training.h5")).unwrap_or_default();
    let _ = bits;
    let rows = label.len() as u64;
    let per_clip = 7 * 3 * 32 * 5 * 4;
    let size = std::fs::metadata(dir.join("out/training.h5"))
        .unwrap()
        .len();
    assert!(
        size < rows * per_clip + 64 * 1024,
        "{size} bytes for {rows} rows of {per_clip}"
    );
}

#[test]
fn a_missing_manifest_file_is_listed_and_fails_with_on_error_fail() {
    let dir = Dir::demo(5);
    let wav: PathBuf = std::fs::read_dir(dir.join("data/training/leak"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    dir.create("m/a.wav", std::fs::read(&wav).unwrap());
    dir.create(
        "m/clips.csv",
        "path,label,split\na.wav,leak,t\ngone.wav,leak,t\n",
    );
    let out = dir
        .melctl()
        .args([
            "build",
            "--manifest",
            "m/clips.csv",
            "-o",
            "out",
            "--backend",
            "cpu",
        ])
        .stdout();
    assert!(out.contains("skipped") && out.contains("gone.wav"), "{out}");
    let err = dir
        .melctl()
        .args([
            "build",
            "--manifest",
            "m/clips.csv",
            "-o",
            "out2",
            "--backend",
            "cpu",
        ])
        .args(["--on-error", "fail"])
        .stderr_of_failure();
    assert!(err.contains("gone.wav"), "{err}");
}

#[test]
fn a_truncated_cache_during_a_build_is_explained_not_a_bare_sigbus() {
    let dir = Dir::demo(600);
    let cache = dir.join("cache");
    let args = [
        "build",
        "-i",
        "data",
        "-o",
        "out",
        "--backend",
        "cpu",
        "--loader",
        "memmap",
        "--threads",
        "1",
        "--cache-dir",
    ];
    dir.melctl().args(args).arg(&cache).stdout();
    let file = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("training"))
        .unwrap();
    let mut c = dir.melctl();
    c.args([
        "build",
        "-i",
        "data",
        "-o",
        "out2",
        "--backend",
        "cpu",
        "--loader",
        "memmap",
    ])
    .args(["--threads", "1", "--split", "training", "--cache-dir"])
    .arg(&cache);
    let child = c
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(150));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(4096)
        .unwrap();
    let o = child.wait_with_output().unwrap();
    if o.status.success() {
        println!("inconclusive: the build finished before the cache was truncated");
        return;
    }
    let err = text(&o.stderr);
    c.check(
        &o,
        o.status.code() == Some(74) && err.contains("a memory-mapped file changed"),
        "exit 74 with the explanation",
    );
    assert!(dir.names("out2").iter().all(|n| !n.ends_with(".h5")));
}

#[test]
fn strict_counts_the_files_a_split_kept_from_an_interrupted_publish_lacks() {
    if !strace() {
        return;
    }
    // A broken file in training; the --resume build is killed at each rename in turn.
    // Where the kill leaves training published with its journal committed, the next
    // --resume run keeps training as it is: it must still name the file the killed run
    // left out of it, and --strict must exit 3 for it.
    let dir = Dir::demo(9);
    dir.create("data/training/leak/zz-broken.wav", "RIFF....WAVEjunk");
    let mut kept = 0;
    for n in 1..60 {
        let _ = std::fs::remove_dir_all(dir.join("out"));
        let a = build_argv(&["--resume", "-q"]);
        let o = under_strace(&dir, &a, &format!("inject=renameat:signal=KILL:when={n}"));
        if o.status.success() {
            break; // fewer than n renames in every thread: each point was tried
        }
        // The same state resumed with --on-error fail: a kept split lacking a file
        // must fail the build as a skipped file would (it exited 0).
        let _ = std::fs::remove_dir_all(dir.join("out-fail"));
        copy_tree(&dir.join("out"), &dir.join("out-fail"));
        let mut fail = build(&dir, "out-fail", &["--resume", "--on-error", "fail"]);
        let of = fail.output();
        let ferr = text(&of.stderr);
        if ferr.contains("training: resume: already built by the interrupted run; kept") {
            fail.check(
                &of,
                !of.status.success()
                    && ferr.contains("--on-error fail: build again without --resume"),
                "--on-error fail refuses a kept split that lacks a file",
            );
        }
        let quiet = if n % 2 == 0 { "-q" } else { "-v" };
        let mut resume = build(&dir, "out", &["--resume", "--strict", quiet]);
        let o = resume.output();
        let err = text(&o.stderr);
        // Quiet names skipped files on stderr, the summary on stdout.
        let all = err.clone() + &text(&o.stdout);
        if err.contains("training: resume: already built by the interrupted run; kept") {
            kept += 1;
            resume.check(&o, o.status.code() == Some(3), "--strict exits 3");
            resume.check(
                &o,
                all.contains(
                    "skipped data/training/leak/zz-broken.wav: left out by the interrupted run",
                ),
                "the file the kept split lacks is named",
            );
        } else {
            resume.check(
                &o,
                o.status.code() == Some(3),
                "--strict exits 3 after a rebuild",
            );
        }
    }
    assert!(
        kept > 0,
        "no kill point left training published and committed"
    );
}

/// Copies the folder `from` to `to` (files and folders, recursively).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// Each split of `out` as melread opens it: its dtype, or why it was refused.
fn open_splits(out: &Path) -> Vec<(&'static str, Result<melkit::core::Dtype, String>)> {
    SPLITS
        .iter()
        .map(|&s| {
            let r = melkit::read::Split::open_in(out, s);
            (s, r.map(|x| x.dtype()).map_err(|e| e.to_string()))
        })
        .collect()
}

/// Ctrl-C while the outputs are being committed: the publish completes whole, and the
/// build says so (it printed "interrupted" and exited 0 with no word of what happened).
#[test]
fn an_interrupt_says_truly_whether_the_outputs_were_committed() {
    if !strace() {
        return;
    }
    let dir = Dir::demo(9);
    build(&dir, "prev", &["--dtype", "f32"]).stdout();
    let argv = build_argv(&["--split", "training", "-q"]);
    // During the publish: the first rename of the run is the publish's first.
    let mut committed = 0;
    for call in ["renameat", "renameat2", "rename"] {
        let _ = std::fs::remove_dir_all(dir.join("out"));
        copy_tree(&dir.join("prev"), &dir.join("out"));
        let o = under_strace(&dir, &argv, &format!("inject={call}:signal=INT:when=1"));
        let err = String::from_utf8_lossy(&o.stderr);
        if !err.contains("interrupted: stopping") {
            continue; // glibc did not rename with this call
        }
        committed += 1;
        assert!(o.status.success(), "{call}: {:?} {err}", o.status);
        assert!(
            err.contains("the build completed and its outputs are whole"),
            "{call}: {err}"
        );
        let s = melkit::read::Split::open_in(dir.join("out"), "training").unwrap();
        assert_eq!(
            s.dtype(),
            melkit::core::Dtype::F16,
            "{call}: the new build's split"
        );
    }
    assert_eq!(committed, 1, "one rename call interrupted the publish");
}

#[test]
fn a_kill_at_every_rename_of_a_publish_never_leaves_two_builds_readable_as_one() {
    if !strace() {
        return;
    }
    // The previous output is f16; the build killed at each rename in turn writes f32. A
    // split of either build may be left at its final path, but whatever melread (and so
    // inspect, show and --resume) opens must be of one build: the others are refused,
    // saying why.
    let dir = Dir::demo(9);
    for sink in ["hdf5", "npy"] {
        let _ = std::fs::remove_dir_all(dir.join("prev"));
        build(&dir, "prev", &["--sink", sink]).stdout();
        let mut mixes = 0;
        for call in ["renameat", "renameat2"] {
            for n in 1.. {
                let _ = std::fs::remove_dir_all(dir.join("out"));
                copy_tree(&dir.join("prev"), &dir.join("out"));
                let cmd = build_argv(&["--sink", sink, "--dtype", "f32", "-q"]);
                let o = under_strace(&dir, &cmd, &format!("inject={call}:signal=KILL:when={n}"));
                if o.status.success() {
                    break; // fewer than n such calls: every point was tried
                }
                assert!(n < 100, "{call}: no end");
                let splits = open_splits(&dir.join("out"));
                let opened: std::collections::BTreeSet<_> = splits
                    .iter()
                    .filter_map(|(_, r)| r.as_ref().ok().map(|d| d.name()))
                    .collect();
                assert!(
                    opened.len() <= 1,
                    "{sink}: killed at {call} #{n}: splits of two builds open as one dataset: {splits:?}\n{}",
                    dir.listing()
                );
                for (s, r) in &splits {
                    if let Err(e) = r {
                        assert!(
                            e.contains("interrupted while publishing")
                                && e.contains("run the build again"),
                            "{sink}: killed at {call} #{n}: {s}: {e}"
                        );
                    }
                }
                mixes += usize::from(splits.iter().any(|(_, r)| r.is_err()));
            }
        }
        println!("{sink}: {mixes} kill points left splits of two builds; each was refused");
        assert!(mixes > 0, "{sink}: no kill fell between two renames");
        // inspect says what is wrong; the next build publishes a complete set.
        let _ = std::fs::remove_dir_all(dir.join("out"));
        copy_tree(&dir.join("prev"), &dir.join("out"));
        let cmd = build_argv(&["--sink", sink, "--dtype", "f32", "-q"]);
        under_strace(&dir, &cmd, "inject=renameat:signal=KILL:when=2");
        let name = if sink == "hdf5" {
            "out/testing.h5"
        } else {
            "out/testing.npy.d"
        };
        if sink == "hdf5" {
            let err = dir.melctl().args(["inspect", name]).stderr_of_failure();
            assert!(err.contains("interrupted while publishing"), "{err}");
        }
        build(&dir, "out", &["--sink", sink, "--dtype", "f32"]).stdout();
        for (s, r) in open_splits(&dir.join("out")) {
            assert_eq!(r, Ok(melkit::core::Dtype::F32), "{sink}: {s}");
        }
    }
}

#[test]
fn a_journal_is_trusted_only_for_the_output_at_the_final_path() {
    if !strace() {
        return;
    }
    // Issue 22: a --resume build killed after publishing but before removing its
    // journals, then a plain --dtype f32 build, then the original --resume: it must not
    // keep the f32 outputs as its own.
    let dir = Dir::demo(9);
    let journal = |s: &str| dir.join(format!("out/.{s}.resume"));
    let mut killed_at = None;
    for n in 1..200 {
        let _ = std::fs::remove_dir_all(dir.join("out"));
        let o = under_strace(
            &dir,
            &build_argv(&["--resume", "-q"]),
            &format!("inject=unlinkat:signal=KILL:when={n}"),
        );
        if o.status.success() {
            break;
        }
        let published = SPLITS
            .iter()
            .all(|s| dir.join(format!("out/{s}.h5")).exists());
        if published && SPLITS.iter().all(|s| journal(s).join("committed").exists()) {
            killed_at = Some(n);
            break;
        }
    }
    assert!(
        killed_at.is_some(),
        "no kill left the outputs published with their journals"
    );
    println!("killed at unlinkat #{killed_at:?}: published, journals left");
    copy_tree(&dir.join("out"), &dir.join("saved"));
    let resume = || {
        let mut c = dir.melctl();
        c.args(build_argv(&["--resume"]));
        c
    };
    let dtypes = || -> Vec<_> {
        open_splits(&dir.join("out"))
            .into_iter()
            .map(|(s, r)| (s, r.unwrap()))
            .collect()
    };
    let all_f16: Vec<_> = SPLITS
        .iter()
        .map(|&s| (s, melkit::core::Dtype::F16))
        .collect();
    // A plain build replaces the outputs (and makes the journals stale).
    build(&dir, "out", &["--dtype", "f32"]).stdout();
    let mut c = resume();
    let o = c.output();
    let err = text(&o.stderr);
    c.check(&o, o.status.success(), "the resume succeeds");
    c.check(
        &o,
        !err.contains("kept"),
        "nothing of the f32 build is kept",
    );
    assert_eq!(dtypes(), all_f16, "{err}");
    // Even where a journal outlived the plain build (one run by an older melctl, or a
    // removal that failed), it is checked against the output at the final path.
    build(&dir, "out", &["--dtype", "f32"]).stdout();
    for s in SPLITS {
        copy_tree(&dir.join(format!("saved/.{s}.resume")), &journal(s));
    }
    let mut c = resume();
    let o = c.output();
    let err = text(&o.stderr);
    c.check(&o, o.status.success(), "the resume succeeds");
    c.check(
        &o,
        !err.contains("kept") && err.contains("no longer what is there"),
        "the stale journal is recognised",
    );
    assert_eq!(dtypes(), all_f16, "{err}");
}

#[test]
fn a_full_disk_inside_the_hdf5_library_is_an_error_that_says_so() {
    if !strace() {
        return;
    }
    // Every write of the HDF5 sink in turn fails with ENOSPC (strace counts per thread:
    // `when=N` fails the N-th write of every thread): the library's own writes
    // (metadata, small datasets, compressed chunks) as well as ours. Each run must end
    // with exit 1 naming the output and the full disk: never a crash, never the
    // library's bare "refused".
    let dir = Dir::demo(9);
    dir.create(
        "gzip.toml",
        format!("{SHORT_CLIPS}[hdf5]\nchunk_clips = 2\ngzip = 1\n"),
    );
    for (config, errno, says) in [
        ("short.toml", "ENOSPC", "the disk is full"),
        ("gzip.toml", "ENOSPC", "the disk is full"),
        ("gzip.toml", "EDQUOT", "the disk quota is exhausted"),
    ] {
        let mut chunk_named = false;
        for n in 1.. {
            let _ = std::fs::remove_dir_all(dir.join("out"));
            let cmd = [
                "build",
                "-i",
                "data",
                "-o",
                "out",
                "--config",
                config,
                "--backend",
                "cpu",
                "--split",
                "training",
            ];
            let o = under_strace(
                &dir,
                &cmd,
                &format!("inject=pwrite64:error={errno}:when={n}"),
            );
            if o.status.success() {
                break; // past every thread's last write
            }
            assert!(n < 200, "no end");
            let err = text(&o.stderr);
            assert!(
                o.status.code() == Some(1) && err.contains("out/training.h5") && err.contains(says),
                "{config}, write #{n} failing with {errno}: {:?}\n{err}",
                o.status
            );
            assert!(!err.contains("refused chunk"), "{err}");
            chunk_named |= err.contains("writing chunk");
            assert!(dir.names("out").iter().all(|n| !n.ends_with(".h5")));
            assert_eq!(leftovers(&dir.join("out")), Vec::<String>::new());
        }
        println!("{config} {errno}: every failed write was reported");
        if config == "gzip.toml" {
            assert!(chunk_named, "{errno}: no failed chunk write was tried");
        }
    }
}
