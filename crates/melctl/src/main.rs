//! melctl: labelled audio folders to log-mel-spectrogram datasets (the CLI is the
//! library's [`melctl_cli::main_with_args`], shared with the Python package's command).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(melctl_cli::main_with_args(std::env::args_os()))
}
