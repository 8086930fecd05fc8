//! `melctl build` over melkit's build: the settings from the flags (the cache folder from
//! the environment), the progress bar and notices on stderr, and the words of its errors
//! (flag names, what to type next).

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::Result;
use mel_core::Config;
use mel_core::config::LoaderKind;
pub use melkit::dataset::{BuildReport, SplitReport};
use melkit::dataset::{BuildSettings, Error, Observer};

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
            OnError::Skip => melkit::dataset::OnError::Skip,
            OnError::Fail => melkit::dataset::OnError::Fail,
        },
        only: args.splits.clone(),
        resume: args.resume,
        cache_dir,
    })
}

/// The cache folder the configuration names; by default melkit's
/// [`default_cache_dir`](melkit::dataset::default_cache_dir) from this process's
/// `XDG_CACHE_HOME` and `HOME`.
pub fn cache_dir(config: &Config) -> Result<PathBuf> {
    if !config.run.cache_dir.is_empty() {
        return Ok(PathBuf::from(&config.run.cache_dir));
    }
    let xdg = std::env::var_os("XDG_CACHE_HOME");
    let home = std::env::var_os("HOME");
    Ok(melkit::dataset::default_cache_dir(
        xdg.as_deref(),
        home.as_deref(),
    )?)
}

/// The build's observer on a terminal: notices on stderr, one progress bar per split.
pub struct Terminal<'a> {
    progress: &'a Progress,
    bar: Mutex<Option<crate::progress::Meter>>,
}

impl<'a> Terminal<'a> {
    /// Notices on stderr, bars from `progress`.
    pub fn new(progress: &'a Progress) -> Self {
        Terminal {
            progress,
            bar: Mutex::new(None),
        }
    }

    fn with_bar(&self, f: impl FnOnce(&mut Option<crate::progress::Meter>)) {
        f(&mut self.bar.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

impl Observer for Terminal<'_> {
    fn notice(&self, line: &str) {
        errln!("{line}");
    }

    fn split_started(&self, split: &str, clips: u64) {
        let bar = self.progress.meter(clips, &format!("build {split}"));
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
                bar.finish()
            }
        });
    }
}

/// The first Ctrl-C (or SIGTERM, SIGHUP) raises `cancel`, which stops the work cleanly
/// with no output committed; a second exits at once (status 130).
///
/// The flag is raised inside the signal handler, so a thread the signal interrupts sees
/// it as soon as the interrupted call returns: an interrupt during the outputs' publish
/// is always reported as such. (A handler thread, as the `ctrlc` crate has, raised it
/// later: a build that finished first exited without a word of the interrupt.)
pub fn stop_on_ctrl_c(cancel: &std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    const SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];
    for signal in SIGNALS {
        // The exit goes first: it acts only once an earlier signal has raised the flag.
        let _ = signal_hook::flag::register_conditional_shutdown(signal, 130, cancel.clone());
        let _ = signal_hook::flag::register(signal, cancel.clone());
    }
    // The message, from a thread of its own (a handler may not print).
    if let Ok(mut signals) = signal_hook::iterator::Signals::new(SIGNALS) {
        let _ = std::thread::Builder::new()
            .name("ctrl-c".into())
            .spawn(move || {
                if signals.forever().next().is_some() {
                    say_interrupted();
                }
            });
    }
}

/// Says that an interrupt came if `cancel` is raised: the command calls it before it
/// reports how the interrupt ended, so the line is never lost to a process that exits
/// before the signal's message thread runs.
pub fn say_if_interrupted(cancel: &std::sync::atomic::AtomicBool) {
    if cancel.load(std::sync::atomic::Ordering::SeqCst) {
        say_interrupted();
    }
}

/// Says once that an interrupt came, from whichever thread gets there first.
fn say_interrupted() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::SeqCst) {
        errln!("\ninterrupted: stopping (each output is committed whole or not at all)");
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
