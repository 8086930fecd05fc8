//! `melctl build` over melkit's build: the settings from the flags (the cache folder from
//! the environment), the progress bar and notices on stderr, and the words of its errors
//! (flag names, what to type next).

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, Result};
use indicatif::ProgressBar;
use mel_core::Config;
use mel_core::config::LoaderKind;
pub use melkit::build::{BuildReport, SplitReport};
use melkit::build::{BuildSettings, Error, Observer};

use crate::cli::{BuildArgs, OnError};
use crate::progress::Progress;

/// The build's settings: `config` and the flags, resolved once.
pub fn settings(config: Config, args: &BuildArgs) -> Result<BuildSettings> {
    let cached = matches!(config.run.loader, LoaderKind::Auto | LoaderKind::Memmap);
    let cache_dir = if cached {
        Some(cache_dir(&config)?)
    } else {
        None
    };
    Ok(BuildSettings {
        config,
        on_error: match args.on_error {
            OnError::Skip => melkit::build::OnError::Skip,
            OnError::Fail => melkit::build::OnError::Fail,
        },
        only: args.splits.clone(),
        resume: args.resume,
        cache_dir,
    })
}

/// The cache folder the configuration names; by default `$XDG_CACHE_HOME/melctl`, else
/// `~/.cache/melctl`, else this user's own folder in the system's temporary folder
/// (`melctl-cache-UID`, mode 0700): a shared, predictable `/tmp/melctl-cache` could be
/// made first by another user, who would then serve this user's decoded audio.
pub fn cache_dir(config: &Config) -> Result<PathBuf> {
    if !config.run.cache_dir.is_empty() {
        return Ok(PathBuf::from(&config.run.cache_dir));
    }
    let var = |name| std::env::var_os(name).filter(|x| !x.is_empty());
    if let Some(x) = var("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(x).join("melctl"));
    }
    if let Some(h) = var("HOME") {
        return Ok(PathBuf::from(h).join(".cache").join("melctl"));
    }
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let dir = std::env::temp_dir().join(format!("melctl-cache-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let m = std::fs::symlink_metadata(&dir)
        .with_context(|| format!("cannot create the cache folder {}", dir.display()))?;
    if !m.is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
        anyhow::bail!(
            "{}: the default cache folder (no HOME or XDG_CACHE_HOME) is not a private folder of this user; set --cache-dir",
            dir.display()
        );
    }
    Ok(dir)
}

/// The build's observer on a terminal: notices on stderr, one progress bar per split.
pub struct Terminal<'a> {
    progress: &'a Progress,
    bar: Mutex<Option<ProgressBar>>,
}

impl<'a> Terminal<'a> {
    /// Notices on stderr, bars from `progress`.
    pub fn new(progress: &'a Progress) -> Self {
        Terminal {
            progress,
            bar: Mutex::new(None),
        }
    }

    fn with_bar(&self, f: impl FnOnce(&mut Option<ProgressBar>)) {
        f(&mut self.bar.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

impl Observer for Terminal<'_> {
    fn notice(&self, line: &str) {
        errln!("{line}");
    }

    fn split_started(&self, split: &str, clips: u64) {
        let bar = self.progress.bar(clips, &format!("build {split}"));
        self.with_bar(|b| *b = Some(bar));
    }

    fn progress(&self, n: u64) {
        self.with_bar(|b| {
            if let Some(bar) = b {
                bar.inc(n)
            }
        });
    }

    fn split_finished(&self, _split: &str) {
        self.with_bar(|b| {
            if let Some(bar) = b.take() {
                bar.finish_and_clear()
            }
        });
    }
}

/// A build error in the CLI's words: what was refused, and the flag or command to use.
pub fn in_words(e: Error) -> anyhow::Error {
    match e {
        Error::Stopped { split, cause } => anyhow::anyhow!(
            "{cause} (split {split}; --on-error fail stops at the first bad file and writes nothing)"
        ),
        Error::Interrupted {
            split: Some(split),
            journaled: true,
        } => anyhow::anyhow!(
            "interrupted: split {split} was not written; its finished batches are in the journal: run the same command with --resume to continue"
        ),
        Error::Interrupted {
            split: Some(split),
            journaled: false,
        } => anyhow::anyhow!("interrupted: split {split} was not written; no output was changed"),
        Error::Interrupted {
            split: None,
            journaled,
        } => anyhow::anyhow!(
            "interrupted before the outputs were committed: no output was changed{}",
            if journaled {
                "; the finished batches are in the journals: run the same command with --resume to continue"
            } else {
                ""
            }
        ),
        e @ Error::KeptIncomplete { .. } => {
            anyhow::anyhow!("{e}; --on-error fail: build again without --resume")
        }
        Error::KeptMismatch {
            path,
            built,
            reason,
        } => anyhow::anyhow!(
            "--split {built} would leave {} beside it, {reason}; rebuild every split (no --split), or build with the same classes and settings",
            path.display()
        ),
        e => e.into(),
    }
}
