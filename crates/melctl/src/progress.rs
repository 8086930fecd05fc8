//! Progress bars (indicatif), drawn only when stderr is a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Makes progress bars, or hidden ones when `enabled` is false.
pub struct Progress {
    enabled: bool,
}

impl Progress {
    /// Bars are shown when stderr is a terminal.
    pub fn for_stderr() -> Self {
        Progress {
            enabled: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        }
    }

    /// A bar of `len` items labelled `label`.
    pub fn bar(&self, len: u64, label: &str) -> ProgressBar {
        if !self.enabled {
            return ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        }
        let bar = ProgressBar::new(len);
        bar.set_style(
            ProgressStyle::with_template("{msg:>18} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_message(label.to_string());
        bar
    }
}
