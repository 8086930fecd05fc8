//! Why a build did not publish. The kinds a caller may act on are variants of their own
//! (stopped at a bad file, interrupted, a kept split that does not fit); the words for a
//! terminal (flag names, what to type next) are the caller's.

use std::path::PathBuf;

/// A build's failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// From the layers below: configuration, decoding, a sink, the file system.
    #[error(transparent)]
    Core(#[from] mel_core::Error),
    /// [`OnError::Fail`](super::OnError::Fail) stopped the build at the first bad file or
    /// folder of `split`; nothing was written.
    #[error("{cause} (split {split}: the build stops at the first bad file and writes nothing)")]
    Stopped {
        /// The split being built.
        split: String,
        /// The bad file or folder and why, in one line.
        cause: String,
    },
    /// The cancel flag was raised before the outputs were committed: nothing changed.
    /// `split` is the split being computed (`None`: all were computed, the publish had
    /// not begun); `journaled`: the finished batches are kept for a resumed build.
    #[error("interrupted{}: no output was changed", split.as_ref().map(|s| format!(": split {s} was not written")).unwrap_or_default())]
    Interrupted {
        /// The split being computed, if any.
        split: Option<String>,
        /// Whether finished batches are in the resume journals.
        journaled: bool,
    },
    /// Every file of split `split` was left out: publishing it would replace its output
    /// with an empty one (a mount that went away, a manifest whose rows name nothing).
    /// Nothing was published.
    #[error(
        "split {split}: all {files} of its files were left out (first: {first}); nothing was published, the outputs are as they were"
    )]
    NothingLeft {
        /// The split.
        split: String,
        /// Its files.
        files: usize,
        /// The first file left out and why, in one line.
        first: String,
    },
    /// A resumed build would keep `output` (published by the interrupted run), which
    /// lacks `missing` files of split `split`, while every file was asked for.
    #[error("{}: {missing} file(s) missing from split {split}, which the interrupted run published without them (first: {})", output.display(), first.display())]
    KeptIncomplete {
        /// The kept output.
        output: PathBuf,
        /// Its split.
        split: String,
        /// Files it lacks.
        missing: usize,
        /// The first of them.
        first: PathBuf,
    },
    /// A build of some splits would leave beside them `path`, a split of the folder built
    /// with another label map or mel configuration (or that does not open).
    #[error("building split {built} would leave {} beside it, {reason}", path.display())]
    KeptMismatch {
        /// The split that would stay.
        path: PathBuf,
        /// The first split being built.
        built: String,
        /// What differs, or why it does not open.
        reason: String,
    },
    /// A shard asked to build only some splits: a shard holds its part of every split, or
    /// the shards cannot be merged.
    #[error(
        "shard {shard} of only some splits: a shard holds its part of every split, or the shards cannot be merged"
    )]
    ShardOfSomeSplits {
        /// The shard.
        shard: super::Shard,
    },
    /// A split-level refusal before any work: `split: reason`.
    #[error("split {split}: {reason}")]
    Split {
        /// The split.
        split: String,
        /// Why.
        reason: String,
    },
}

/// A build's result.
pub type Result<T> = std::result::Result<T, Error>;
