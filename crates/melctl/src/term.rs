//! The terminal: everything melctl prints goes through here (clippy's `disallowed_macros`
//! keeps `println!` and `eprintln!` out of this crate). `println!` panics when stdout is a
//! closed pipe (`melctl inspect X | head -1`) or a full device (`>/dev/full`); here a closed
//! stdout ends output quietly, and any other failed write is remembered and becomes exit
//! status 74 with a one-line reason, after the work itself has finished or failed on its own.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to stdout met a closed pipe: later output is dropped, quietly.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// The first failed write (which stream, and the OS error), reported at exit.
static FAILED: Mutex<Option<String>> = Mutex::new(None);

/// Which standard stream a write goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output: results (inspect, config, devices, the summary, `--report -`).
    Out,
    /// Standard error: notices, progress, warnings and errors.
    Err,
}

/// Writes `text` to `stream` whole, flushing stdout so that a failure is seen now and not
/// lost at exit; a failure is recorded (see [`failure`]), never a panic.
pub fn write(stream: Stream, text: &str) {
    let text = &visible(text);
    let result = match stream {
        Stream::Out if STDOUT_CLOSED.load(Ordering::Relaxed) => return,
        Stream::Out => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes()).and_then(|()| out.flush())
        }
        Stream::Err => std::io::stderr().lock().write_all(text.as_bytes()),
    };
    if let Err(e) = result {
        record(stream, &e);
    }
}

/// Writes `bytes` (a picture) to stdout as they are, as [`write`] writes text: a closed
/// stdout (`melctl show X -o - | head -c 8`) ends output quietly, another failure is
/// recorded for the exit status.
pub fn write_bytes(bytes: &[u8]) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        record(Stream::Out, &e);
    }
}

/// `text` with every character that could steer a terminal written as an escape, lines
/// and tabs kept ([`melkit::core::error::visible`]): a file named `.\x1b[2J.wav` is shown,
/// never obeyed.
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    melkit::core::error::visible(text, true)
}

fn record(stream: Stream, e: &std::io::Error) {
    if stream == Stream::Out && e.kind() == std::io::ErrorKind::BrokenPipe {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        return;
    }
    let name = match stream {
        Stream::Out => "standard output",
        Stream::Err => "standard error",
    };
    let mut failed = FAILED.lock().unwrap_or_else(|p| p.into_inner());
    failed.get_or_insert_with(|| format!("cannot write to {name}: {e}"));
}

/// The first write that failed for a reason other than a closed stdout, in words.
pub fn failure() -> Option<String> {
    FAILED.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// `print!` to stdout through [`write`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::term::write($crate::term::Stream::Out, &format!($($arg)*)) };
}

/// `println!` to stdout through [`write`].
macro_rules! outln {
    ($($arg:tt)*) => { $crate::term::write($crate::term::Stream::Out, &format!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` to stderr through [`write`].
macro_rules! err {
    ($($arg:tt)*) => { $crate::term::write($crate::term::Stream::Err, &format!($($arg)*)) };
}

/// `eprintln!` to stderr through [`write`].
macro_rules! errln {
    ($($arg:tt)*) => { $crate::term::write($crate::term::Stream::Err, &format!("{}\n", format_args!($($arg)*))) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_that_steer_a_terminal_are_shown_escaped() {
        assert_eq!(visible("a.wav: ok\n\tnext"), "a.wav: ok\n\tnext");
        assert_eq!(visible("x\u{1b}[2J.wav"), "x\\u{1b}[2J.wav");
        assert_eq!(visible("a\rb\u{7f}c\u{9b}d"), "a\\u{d}b\\u{7f}c\\u{9b}d");
        assert_eq!(visible("evil\u{202e}vaw.exe"), "evil\\u{202e}vaw.exe");
    }
}
