//! Publishing a build: every split renamed into place, then the folder's build record
//! ([`mel_core::record`]) rewritten to name them, so that a kill between two renames
//! leaves splits the record does not name, which readers refuse, never a silent mix of
//! two builds.

use std::path::Path;

use mel_core::record::{self, Entry, Record};
use mel_core::{Finished, Result};

/// Publishes `outputs` (split name, finished output) of build `build_id` in the folder
/// `out`, then records them. Of the splits the previous record named, only those `keep`
/// says yes to stay named (a `--split` build keeps the others; a whole build keeps only
/// the splits it kept from an interrupted publish), so a split an earlier build left in
/// the folder is never vouched for as part of this one. A folder without a readable
/// record gets an empty one first, so that a first publish cut short is detected too.
/// `durable`: flush the record.
pub fn publish_build(
    out: &Path,
    build_id: &str,
    outputs: Vec<(String, Finished)>,
    keep: &dyn Fn(&str) -> bool,
    durable: bool,
) -> Result<()> {
    let mut rec = match record::read(out) {
        Ok(Some(r)) => r,
        // None yet, or one that cannot be trusted: a record listing nothing comes first.
        _ => {
            let empty = Record::default();
            record::write(out, &empty, durable)?;
            empty
        }
    };
    // Every output's data on the disk first, then the renames back to back, then one
    // flush of the folder (the record's write below): a kill lands between two renames
    // only within those microseconds, not during a flush of gigabytes.
    for (_, output) in &outputs {
        output.flush()?;
    }
    let mut published = Vec::with_capacity(outputs.len());
    for (split, output) in outputs {
        let path = output.publish_flushed()?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        published.push((split, name));
    }
    rec.build = Some(build_id.to_string());
    rec.splits.retain(|name, _| keep(name));
    for (split, output) in published {
        let entry = Entry {
            build: build_id.to_string(),
            output,
        };
        rec.splits.insert(split, entry);
    }
    record::write(out, &rec, durable)
}
