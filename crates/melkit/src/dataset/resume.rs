//! What a resumed build keeps: the journal's key, its state in words, the files a kept
//! output lacks, and whether the splits a partial build leaves beside it still match.

use std::path::Path;

use mel_audio::ScannedSplit;
use mel_core::{ClipFailure, Config};
use mel_sinks::JournalState;

use super::error::{Error, Result};

/// What a resume journal is for: every setting that changes output values
/// ([`Sameness::Values`](mel_core::config::Sameness::Values)), the backend that actually runs, the class names, and the split's files (the
/// fingerprint the memmap cache uses too).
pub(super) fn journal_fingerprint(
    config: &Config,
    backend: &str,
    labels: &[String],
    split: &ScannedSplit,
) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    // The values, bit for bit: mel-core's one definition (Sameness::Values).
    let resolved: serde_json::Value =
        serde_json::from_str(&config.resolved_json()).expect("a configuration is JSON");
    let values = mel_core::config::Sameness::Values.view(&resolved);
    h.update(values.to_string().as_bytes());
    h.update(&[0]);
    h.update(backend.as_bytes());
    h.update(&[0]);
    h.update(labels.join("\0").as_bytes());
    h.update(&mel_audio::files_fingerprint(&split.files, &config.audio).to_le_bytes());
    h.digest128()
}

/// A journal's state in words.
pub(super) fn describe_journal(state: &JournalState) -> String {
    match state {
        JournalState::Started => "no journal; starting".into(),
        JournalState::Restarted => {
            "the journal is from another configuration, backend or file set; starting over".into()
        }
        JournalState::Resumed {
            clips,
            batches,
            dropped,
        } => format!(
            "{clips} clips in {batches} journal batches{}",
            if dropped.is_empty() {
                String::new()
            } else {
                format!("; dropped and redone: {}", dropped.join(", "))
            }
        ),
    }
}

/// The files of `split` that the output a resumed build keeps does not hold: those the
/// interrupted run skipped, which must still be named (and counted).
pub(super) fn missing_from_kept(output: &Path, split: &ScannedSplit) -> Result<Vec<ClipFailure>> {
    let kept = melread::Split::open(output).map_err(|e| {
        Error::Core(mel_core::Error::output(
            output,
            format!(
                "the output an interrupted run published does not read back ({e}); remove it, or build without resuming"
            ),
        ))
    })?;
    let stored: std::collections::HashSet<&str> = kept.paths().iter().map(String::as_str).collect();
    Ok(split
        .files
        .iter()
        .enumerate()
        .filter(|(_, f)| !stored.contains(f.rel.as_str()))
        .map(|(index, f)| ClipFailure {
            index,
            path: f.path.clone(),
            kind: mel_core::FailureKind::Other,
            reason: "left out by the interrupted run that published this split (kept as it was; that run named the reason)"
                .into(),
        })
        .collect())
}

/// A build of some splits (`only`) leaves the folder's other splits as its build record
/// names them: each must mean the same thing by the same numbers as the splits built now
/// (one label map, one mel configuration), or the folder would pair, say, class 0 = `aaa`
/// in training with class 0 = `leak` in testing. Checked before any work.
pub(super) fn check_kept_splits_match(
    out: &Path,
    only: &[String],
    built: &str,
    label_names: &[String],
    config: &Config,
) -> Result<()> {
    let Some(record) = mel_core::record::read(out)? else {
        return Ok(());
    };
    let resolved: serde_json::Value =
        serde_json::from_str(&config.resolved_json()).expect("the resolved configuration is JSON");
    for (name, entry) in record.splits.iter().filter(|(n, _)| !only.contains(n)) {
        let path = out.join(&entry.output);
        if std::fs::symlink_metadata(&path).is_err() {
            continue;
        }
        let mismatch = |reason: String| Error::KeptMismatch {
            path: path.clone(),
            built: built.to_string(),
            reason,
        };
        let kept = melread::Split::open(&path)
            .map_err(|e| mismatch(format!("split {name}, which does not open: {e}")))?;
        kept.check_matches(built, label_names, &resolved)
            .map_err(|e| mismatch(format!("built another way: {e}")))?;
    }
    Ok(())
}
