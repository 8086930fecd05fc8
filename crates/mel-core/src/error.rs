//! The typed error of every melctl library crate. Each variant is a *kind* a caller can
//! match on (symphonia-style): a configuration problem, an I/O failure, a file that does
//! not decode, an unsupported format, a limit, a device failure, an output failure.
//! Messages say what happened in words; they never name command-line flags.

use std::path::PathBuf;

/// Result alias used across melctl's library crates.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in melctl's libraries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value is out of range; names the field and the limit.
    #[error("invalid configuration: {field}{}{message}", if message.starts_with('=') { " " } else { ": " })]
    Config {
        /// Dotted path of the offending field, e.g. `mel.f_max`.
        field: String,
        /// What is wrong and what the limit is.
        message: String,
    },
    /// A configuration file or string could not be parsed.
    #[error("cannot parse configuration{}: {message}", source_name.as_deref().map(|s| format!(" {s}")).unwrap_or_default())]
    ConfigParse {
        /// Where the text came from (a file path), if known.
        source_name: Option<String>,
        /// The parser's message, with line and column.
        message: String,
    },
    /// An unknown preset name.
    #[error("unknown preset {name:?} (known: {known})")]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// The names that exist, comma-separated.
        known: String,
    },
    /// The operating system refused an I/O operation on a path.
    #[error("{}: {source}", shown(path))]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An input file's content is not valid audio (corrupt, truncated, not audio at all).
    #[error("{}: {reason}", path.display())]
    Decode {
        /// The file.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// Valid input melctl does not handle (a codec, sample format or channel it cannot take).
    #[error("{}: {what}", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is unsupported, in words.
        what: String,
    },
    /// A bound that keeps memory, time or values finite: what would exceed it, with the
    /// figure and the limit in `message`.
    #[error("{what}: {message}")]
    Limit {
        /// The file or configuration field concerned.
        what: String,
        /// The figure and the limit, in words.
        message: String,
    },
    /// The dataset layout or a manifest is not what melctl expects.
    #[error("dataset {}: {reason}", root.display())]
    Dataset {
        /// The dataset root (or manifest).
        root: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// A compute device (CUDA, wgpu) is missing, refused a configuration, or failed.
    #[error("backend {backend}: {message}")]
    Device {
        /// Backend name.
        backend: String,
        /// What happened.
        message: String,
    },
    /// An output could not be written or committed.
    #[error("output {}: {message}", path.display())]
    Output {
        /// The output file or folder.
        path: PathBuf,
        /// What happened.
        message: String,
    },
    /// A buffer or shape did not match the plan (a programming error surfaced as an error).
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// A worker thread failed outside any input (a panic, a thread that stopped).
    #[error("internal error: {0}")]
    Internal(String),
    /// The run was cancelled (an interrupt, or an error in another stage).
    #[error("cancelled")]
    Cancelled,
}

/// `message` on one line: its whitespace runs (an HDF5 error stack's line breaks) one space.
pub fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` with every character that could steer a terminal (C0 and C1 controls, DEL,
/// bidirectional overrides) written as a `\u{..}` escape, so that a file named
/// `.\x1b[2J.wav` is shown, never obeyed; newlines and tabs are kept where `lines` says
/// (a multi-line listing), escaped otherwise (a one-line message). The one escape of every
/// front end (the CLI's output, Python's exceptions and warnings).
pub fn visible(text: &str, lines: bool) -> std::borrow::Cow<'_, str> {
    let steers = |c: char| {
        (c.is_control() && !(lines && (c == '\n' || c == '\t')))
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(steers) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if steers(c) {
            shown.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            shown.push(c);
        }
    }
    std::borrow::Cow::Owned(shown)
}

/// The text a panic carried (`panic!`'s message, an overflow's or an index's), for an error
/// that names what went wrong where a panic was caught.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("unknown")
}

impl Error {
    /// Shorthand for [`Error::Config`].
    pub fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Config {
            field: field.into(),
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// An [`Error::Io`] for a failed read of an input file, saying so ("cannot read: ...")
    /// and keeping the error's kind.
    pub fn read(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let message = format!("cannot read: {source}");
        Error::io(path, std::io::Error::new(source.kind(), message))
    }

    /// Shorthand for [`Error::Decode`].
    pub fn decode(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Decode {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::Unsupported`].
    pub fn unsupported(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        Error::Unsupported {
            path: path.into(),
            what: what.into(),
        }
    }

    /// Shorthand for [`Error::Limit`].
    pub fn limit(what: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Limit {
            what: what.into(),
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::Device`].
    pub fn device(backend: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Device {
            backend: backend.into(),
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::Output`].
    pub fn output(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        Error::Output {
            path: path.into(),
            message: message.to_string(),
        }
    }

    /// The message without the path prefix, for per-file failures that are listed under
    /// their path (`Decode`, `Unsupported`, `Io`, `Limit`); the whole message otherwise.
    pub fn reason(&self) -> String {
        match self {
            Error::Decode { reason, .. } => reason.clone(),
            Error::Unsupported { what, .. } => what.clone(),
            // The file is named beside the reason: its name is not repeated in it.
            Error::Limit { message, .. } => message.clone(),
            Error::Io { source, .. } => source.to_string(),
            other => other.to_string(),
        }
    }

    /// What kind of per-file failure this is, for reports and callers that count them.
    pub fn failure_kind(&self) -> FailureKind {
        match self {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                FailureKind::Missing
            }
            Error::Io { .. } => FailureKind::Io,
            Error::Decode { .. } => FailureKind::Decode,
            Error::Unsupported { .. } => FailureKind::Unsupported,
            Error::Limit { .. } => FailureKind::Limit,
            Error::Cancelled => FailureKind::Cancelled,
            _ => FailureKind::Other,
        }
    }
}

/// Why one input file did not become a clip, as a kind callers can match and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureKind {
    /// The file could not be opened or read (permissions, vanished, not a regular file).
    Io,
    /// The content is not valid audio (corrupt, truncated, not audio).
    Decode,
    /// Valid audio melctl does not handle.
    Unsupported,
    /// Beyond a size or rate limit.
    Limit,
    /// Decoded, but its samples or its spectrogram are not finite numbers (NaN, an
    /// infinity, samples beyond what the f32 arithmetic takes, or values beyond the
    /// output dtype): never stored.
    #[serde(rename = "non-finite")]
    NonFinite,
    /// Not there (a dangling link, a manifest row naming a missing file).
    Missing,
    /// The run stopped before the file was read.
    Cancelled,
    /// Anything else.
    Other,
}

/// A path as errors name it: an empty one (an empty string given for a file) says so.
fn shown(path: &std::path::Path) -> String {
    if path.as_os_str().is_empty() {
        "an empty path (\"\")".to_string()
    } else {
        path.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_reasons() {
        let e = Error::decode("a.wav", "truncated");
        assert_eq!(e.to_string(), "a.wav: truncated");
        assert_eq!(e.reason(), "truncated");
        assert_eq!(e.failure_kind(), FailureKind::Decode);
        let e = Error::read("b.wav", std::io::Error::other("gone"));
        assert_eq!(e.reason(), "cannot read: gone");
        assert_eq!(e.failure_kind(), FailureKind::Io);
        let e = Error::limit("run.queue_depth", "needs 393 GB, the limit is 12 GB");
        assert_eq!(e.failure_kind(), FailureKind::Limit);
        assert!(e.to_string().starts_with("run.queue_depth: needs"));
    }
}
