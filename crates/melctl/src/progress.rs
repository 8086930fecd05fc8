//! Progress: a bar (indicatif) on a terminal, a line every `--progress-every` seconds
//! (10 by default) where stderr is not one (a batch job's log shows the build is alive; a run shorter than that prints
//! none), or nothing (`--quiet`, `--progress none`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use crate::cli::ProgressArg;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Bar,
    Lines(Duration),
    Hidden,
}

/// Makes progress meters, all of one mode.
pub struct Progress {
    mode: Mode,
}

impl Progress {
    /// As `--progress` asks: `auto` is a bar when stderr is a terminal, else a line
    /// every `every`.
    pub fn for_stderr(arg: ProgressArg, every: Duration) -> Self {
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let mode = match arg {
            ProgressArg::Auto if terminal => Mode::Bar,
            ProgressArg::Auto | ProgressArg::Lines => Mode::Lines(every),
            ProgressArg::Bar => Mode::Bar,
            ProgressArg::None => Mode::Hidden,
        };
        Progress { mode }
    }

    /// No progress at all (`--quiet`).
    pub fn hidden() -> Self {
        Progress { mode: Mode::Hidden }
    }

    /// A meter of `len` clips labelled `label`.
    pub fn meter(&self, len: u64, label: &str) -> Meter {
        match self.mode {
            Mode::Hidden => Meter::Bar(ProgressBar::with_draw_target(
                Some(len),
                ProgressDrawTarget::hidden(),
            )),
            Mode::Bar => Meter::Bar(bar(len, label)),
            Mode::Lines(every) => {
                let started = Instant::now();
                Meter::Lines(Lines {
                    label: label.to_string(),
                    len,
                    every,
                    started,
                    at: Mutex::new((0, started, None)),
                })
            }
        }
    }
}

/// A bar of `len` clips labelled `label`, with a whole-number rate.
fn bar(len: u64, label: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg:>18} [{bar:40}] {pos}/{len} clips {rate} eta {eta}")
            .expect("valid template")
            .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0}/s", s.per_sec());
            })
            .progress_chars("=> "),
    );
    bar.set_message(label.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// One split's (or merge's) progress.
pub enum Meter {
    /// A bar, drawn or hidden.
    Bar(ProgressBar),
    /// Lines on stderr.
    Lines(Lines),
}

impl Meter {
    /// `n` more clips done.
    pub fn inc(&self, n: u64) {
        match self {
            Meter::Bar(b) => b.inc(n),
            Meter::Lines(l) => l.inc(n),
        }
    }

    /// Done, every item read (those left out included): the bar cleared, or a last line
    /// written.
    pub fn finish(&self) {
        match self {
            Meter::Bar(b) => b.finish_and_clear(),
            Meter::Lines(l) => l.finish(),
        }
    }

    /// Stopped before the end (the error follows): the bar cleared, no last line.
    pub fn stop(&self) {
        if let Meter::Bar(b) = self {
            b.finish_and_clear();
        }
    }
}

/// Progress as a line every `every`: clips done, rate, time left.
pub struct Lines {
    label: String,
    len: u64,
    every: Duration,
    started: Instant,
    /// Clips done, when the last line was written (or the start), and its count.
    at: Mutex<(u64, Instant, Option<u64>)>,
}

impl Lines {
    fn inc(&self, n: u64) {
        let now = Instant::now();
        let mut at = self.at.lock().unwrap_or_else(|p| p.into_inner());
        at.0 = (at.0 + n).min(self.len);
        if now.duration_since(at.1) >= self.every {
            (at.1, at.2) = (now, Some(at.0));
            errln!("{}", self.line(at.0, now));
        }
    }

    /// A last line saying it is done, where lines were written and the last did not say
    /// so (a run shorter than one interval says nothing: its summary follows at once).
    /// Clips short of the total were left out (named in the summary).
    fn finish(&self) {
        let (done, _, said) = *self.at.lock().unwrap_or_else(|p| p.into_inner());
        if said.is_some_and(|last| last != done || done < self.len) {
            errln!("{}", self.line_done(done, Instant::now()));
        }
    }

    /// `build training: 1050/1250 clips (84%), 247 clips/s, done in 5.1 s (200 left out)`.
    fn line_done(&self, done: u64, now: Instant) -> String {
        let (secs, rate) = self.pace(done, now);
        let kept = format!("{done}/{}", self.len);
        let line = format!(
            "{}: {kept} clips ({:.0}%), {rate:.0} clips/s, done in {secs:.1} s",
            self.label,
            percent(done, self.len)
        );
        if done < self.len {
            format!("{line} ({} left out)", self.len - done)
        } else {
            line
        }
    }

    /// Seconds since the start, and clips per second.
    fn pace(&self, done: u64, now: Instant) -> (f64, f64) {
        let secs = now.duration_since(self.started).as_secs_f64();
        (secs, if secs > 0.0 { done as f64 / secs } else { 0.0 })
    }

    /// `build training: 1200/3000 clips (40%), 850 clips/s, 2 s left`.
    fn line(&self, done: u64, now: Instant) -> String {
        if done >= self.len {
            return self.line_done(done, now);
        }
        let (_, rate) = self.pace(done, now);
        let left = if rate > 0.0 {
            format!("{:.0} s left", (self.len - done) as f64 / rate)
        } else {
            "starting".to_string()
        };
        format!(
            "{}: {done}/{} clips ({:.0}%), {rate:.0} clips/s, {left}",
            self.label,
            self.len,
            percent(done, self.len)
        )
    }
}

/// `done` of `len` in percent (100 of nothing).
fn percent(done: u64, len: u64) -> f64 {
    if len == 0 {
        100.0
    } else {
        100.0 * done as f64 / len as f64
    }
}
