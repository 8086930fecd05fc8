//! Progress bars (indicatif), drawn only when stderr is a terminal and not `--quiet`.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

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

    /// No bars at all (`--quiet`).
    pub fn hidden() -> Self {
        Progress { enabled: false }
    }

    /// A bar of `len` clips labelled `label`, with a whole-number rate.
    pub fn bar(&self, len: u64, label: &str) -> ProgressBar {
        if !self.enabled {
            return ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        }
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
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        bar
    }
}
