//! The typed error of every melctl library crate.

use std::path::PathBuf;

/// Result alias used across melctl's library crates.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in melctl's libraries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value is out of range; names the field and the limit.
    #[error("invalid configuration: {field}: {message}")]
    InvalidConfig {
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
    /// One input file could not be read or decoded.
    #[error("{}: {reason}", path.display())]
    BadInput {
        /// The file.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// The dataset layout is not what melctl expects.
    #[error("dataset {}: {reason}", root.display())]
    Dataset {
        /// The dataset root.
        root: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// A backend failed or refused a configuration.
    #[error("backend {backend}: {message}")]
    Backend {
        /// Backend name.
        backend: String,
        /// What happened.
        message: String,
    },
    /// A sink failed to write its output.
    #[error("sink {}: {message}", path.display())]
    Sink {
        /// The output file.
        path: PathBuf,
        /// What happened.
        message: String,
    },
    /// A buffer or shape did not match the plan (a programming error surfaced as an error).
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// An operating-system I/O error with the path it concerned.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The run was cancelled (Ctrl-C or an error in another stage).
    #[error("cancelled")]
    Cancelled,
}

impl Error {
    /// Shorthand for [`Error::InvalidConfig`].
    pub fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidConfig {
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

    /// Shorthand for [`Error::BadInput`].
    pub fn bad_input(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::BadInput {
            path: path.into(),
            reason: reason.into(),
        }
    }
}
