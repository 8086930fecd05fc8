//! The end-to-end harness, in the style of ripgrep's `tests/util.rs`: a [`Dir`] to build a
//! scenario in, and a [`TestCommand`] that runs the real `melctl` binary there. When an
//! assertion about a run fails, the panic message holds the command line, its exit
//! status, its stdout and stderr, and a listing of the folder it ran in, so a failure in
//! CI explains itself.
#![allow(dead_code)] // each test file uses a part of the harness

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hound::{SampleFormat, WavSpec, WavWriter};

/// A configuration of one-second clips, so builds are quick.
pub const SHORT_CLIPS: &str = "[audio]\nclip_seconds = 1.0\n";

/// A temporary folder a test builds its scenario in.
pub struct Dir {
    root: tempfile::TempDir,
}

impl Dir {
    /// A new empty folder.
    pub fn new() -> Dir {
        Dir {
            root: tempfile::tempdir().expect("a temporary folder"),
        }
    }

    /// A folder holding `melctl demo --clips N --no-build`'s dataset under `data/` and
    /// the short-clip configuration as `short.toml`.
    pub fn demo(clips: usize) -> Dir {
        let dir = Dir::new();
        dir.melctl()
            .args(["demo", "--clips", &clips.to_string(), "--no-build", "demo"])
            .stdout();
        std::fs::rename(dir.join("demo/data"), dir.join("data")).unwrap();
        dir.create("short.toml", SHORT_CLIPS);
        dir
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.root.path()
    }

    /// `rel` inside the folder.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.root.path().join(rel)
    }

    /// Writes `bytes` to `rel` (creating its folders).
    pub fn create(&self, rel: impl AsRef<Path>, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.join(rel);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("create folders");
        std::fs::write(&p, bytes).expect("write a file");
        p
    }

    /// Writes a mono 16-bit WAV of `samples` at `rate` Hz to `rel`.
    pub fn wav(&self, rel: impl AsRef<Path>, samples: &[i16], rate: u32) -> PathBuf {
        let p = self.join(rel);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("create folders");
        let spec = WavSpec {
            channels: 1,
            sample_rate: rate,
            bits_per_sample: 16,
            sample_format: SampleFormat::Int,
        };
        let mut w = WavWriter::create(&p, spec).expect("create a WAV");
        for &s in samples {
            w.write_sample(s).expect("write a sample");
        }
        w.finalize().expect("finish a WAV");
        p
    }

    /// A character device `major:minor` made at `rel` in this folder (1:3 is the null
    /// device, 1:7 the full one), or `None` with the reason printed where `mknod` is
    /// refused (not root). Tests use these, never the system's `/dev/null` or
    /// `/dev/full`: a bug in what is tested must not be able to replace a system file.
    pub fn device(&self, rel: impl AsRef<Path>, major: u32, minor: u32) -> Option<PathBuf> {
        let path = self.join(rel);
        let c = std::ffi::CString::new(path.to_str()?).ok()?;
        // SAFETY: a valid NUL-terminated path; mknod has no other precondition.
        let made = unsafe {
            libc::mknod(
                c.as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(major, minor),
            )
        };
        if made != 0 {
            println!(
                "skipped the device part: mknod {}: {} (needs root)",
                path.display(),
                std::io::Error::last_os_error()
            );
            return None;
        }
        Some(path)
    }

    /// `melctl` to run in this folder.
    pub fn melctl(&self) -> TestCommand {
        TestCommand::new(env!("CARGO_BIN_EXE_melctl"), self.path())
    }

    /// `melctl build -i data -o OUT --config short.toml` in a [`Dir::demo`] folder: add
    /// flags, then run.
    pub fn build(&self, out: &str) -> TestCommand {
        let mut cmd = self.melctl();
        cmd.args(["build", "-i", "data", "-o", out, "--config", "short.toml"]);
        cmd
    }

    /// Any program to run in this folder (python3, the extract example, ...).
    pub fn program(&self, program: impl AsRef<OsStr>) -> TestCommand {
        TestCommand::new(program, self.path())
    }

    /// Every file and folder under the folder, with sizes, one per line.
    pub fn listing(&self) -> String {
        listing(self.path())
    }

    /// The names of the entries of `rel` (a folder inside this one), sorted.
    pub fn names(&self, rel: impl AsRef<Path>) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.join(rel))
            .map(|d| {
                d.map(|e| {
                    e.expect("an entry")
                        .file_name()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

fn listing(root: &Path) -> String {
    let mut out = String::new();
    let mut stack = vec![root.to_path_buf()];
    let mut lines = Vec::new();
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap_or(&p).display().to_string();
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => {
                    lines.push(format!("{rel}/"));
                    stack.push(p);
                }
                Ok(m) => lines.push(format!("{rel} ({} bytes)", m.len())),
                Err(e) => lines.push(format!("{rel} ({e})")),
            }
        }
    }
    lines.sort();
    for l in lines {
        let _ = writeln!(out, "  {l}");
    }
    out
}

/// Whether the environment variable `name` is one the caller's machine sets that would
/// change what a melctl run does: Slurm's (an array task makes every build a shard),
/// Kubernetes' Indexed Job index, and melctl's own (`MELCTL_*`, and the test switches
/// `MEL_*`, which a child never needs).
pub fn is_callers_setting(name: &str) -> bool {
    name.starts_with("SLURM_")
        || name.starts_with("MELCTL_")
        || name.starts_with("MEL_")
        || name == "JOB_COMPLETION_INDEX"
}

/// A command to run, with what a failure message needs.
pub struct TestCommand {
    cmd: Command,
    dir: PathBuf,
}

impl TestCommand {
    /// `program` run in `dir` with none of the caller's settings that change what melctl
    /// does (an array task's shard, melctl's own variables: see [`is_callers_setting`])
    /// and its cache in `dir/.cache`, never the caller's home: a test passes or fails
    /// the same inside a Slurm job, and writes nowhere outside its folder.
    fn new(program: impl AsRef<OsStr>, dir: &Path) -> TestCommand {
        let mut cmd = Command::new(program);
        cmd.current_dir(dir);
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_some_and(is_callers_setting) {
                cmd.env_remove(name);
            }
        }
        cmd.env("XDG_CACHE_HOME", dir.join(".cache"));
        TestCommand {
            cmd,
            dir: dir.to_path_buf(),
        }
    }

    /// Adds one argument.
    pub fn arg(&mut self, a: impl AsRef<OsStr>) -> &mut Self {
        self.cmd.arg(a);
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, a: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd.args(a);
        self
    }

    /// Sets an environment variable.
    pub fn env(&mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> &mut Self {
        self.cmd.env(k, v);
        self
    }

    /// The underlying command (for spawning and signalling).
    pub fn command(&mut self) -> &mut Command {
        &mut self.cmd
    }

    /// Runs to completion whatever the outcome.
    #[track_caller]
    pub fn output(&mut self) -> Output {
        self.cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", self.cmd))
    }

    /// Runs; panics with the whole context unless it succeeds. Returns stdout.
    #[track_caller]
    pub fn stdout(&mut self) -> String {
        let o = self.output();
        if !o.status.success() {
            panic!("{}", self.explain(&o, "expected success"));
        }
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Runs; panics with the whole context unless it fails. Returns stderr.
    #[track_caller]
    pub fn stderr_of_failure(&mut self) -> String {
        let o = self.output();
        if o.status.success() {
            panic!("{}", self.explain(&o, "expected failure"));
        }
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    /// Runs; panics with the whole context unless it exits with `code`. Returns the output.
    #[track_caller]
    pub fn expect_code(&mut self, code: i32) -> Output {
        let o = self.output();
        if o.status.code() != Some(code) {
            panic!(
                "{}",
                self.explain(&o, &format!("expected exit code {code}"))
            );
        }
        o
    }

    /// A failure message: what was expected, the command, its outcome and the folder.
    pub fn explain(&self, o: &Output, expected: &str) -> String {
        format!(
            "\n{expected}, got {}\ncommand: {:?}\nin: {}\n--- stdout\n{}\n--- stderr\n{}\n--- folder\n{}",
            o.status,
            self.cmd,
            self.dir.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
            listing(&self.dir)
        )
    }

    /// Asserts `cond` about a finished run, explaining the run if it does not hold.
    #[track_caller]
    pub fn check(&self, o: &Output, cond: bool, what: &str) {
        if !cond {
            panic!("{}", self.explain(o, what));
        }
    }
}
