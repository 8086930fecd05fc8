//! The on-disk format of a split, in one home: the outputs' names, the HDF5 dataset and
//! attribute names, the npy folder's file names and `meta.json` keys, the format version,
//! the `.npy` header writer and parser ([`npy`]) and HDF5's byte shuffle ([`shuffle`]).
//! The sinks write with these and melread reads with them, so writer and reader cannot
//! drift (arrow's IPC keeps its reader, writer and magic together the same way).

pub mod npy;
pub mod shuffle;

/// The format version the sinks write (HDF5 root attribute and npy `meta.json` key
/// [`FORMAT_VERSION`]). 1 is the format before the version was written (read as such);
/// 2 added the version itself and `build_id`. Readers refuse a version above theirs.
pub const VERSION: u64 = 2;

/// The attribute (HDF5) or `meta.json` key holding the format version.
pub const FORMAT_VERSION: &str = "format_version";

/// The longest split or class name, in bytes: a split names files (`.NAME.partial-…`,
/// `NAME.npy.d`) whose names the file system limits to 255 bytes, and is stored in every
/// output. The name check refuses longer names, and readers refuse them in a file.
pub const MAX_NAME_BYTES: usize = 200;

/// The largest HDF5 chunk of `mel`, in bytes once decoded (256 MiB): the writer refuses a
/// configuration whose chunks would be larger (`hdf5.chunk_clips`), and every reader
/// refuses a file that claims larger ones. One bound for both, so melctl never writes
/// what its own readers refuse.
pub const MAX_CHUNK_BYTES: usize = 256 << 20;

/// The most metadata columns a split holds (manifest columns beyond `path`, `label` and
/// `split`, or the group a `--group-pattern` finds): writer and reader share the bound.
pub const MAX_META_COLUMNS: usize = 64;

/// The longest metadata value, in bytes (a speaker id, a session, a recording's name).
pub const MAX_META_VALUE_BYTES: usize = 1024;

/// The longest metadata column name, in bytes.
pub const MAX_META_COLUMN_BYTES: usize = 64;

/// The column a `--group-pattern` stores each clip's group in.
pub const GROUP_COLUMN: &str = "group";

/// Checks a metadata column's name: 1 to [`MAX_META_COLUMN_BYTES`] ASCII letters, digits,
/// `_`, `-` or `.`, starting with a letter, and neither one of the manifest's own columns
/// (`path`, `label`, `split`) nor a look-alike of one (`Split`, `labels`, `lable`): a
/// misspelt `Split` column once re-split the rows meant for testing, and a look-alike is
/// refused rather than kept as metadata. The error says what is wrong.
pub fn check_column_name(name: &str) -> std::result::Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= MAX_META_COLUMN_BYTES
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !valid {
        return Err(format!(
            "{:?} is not a column name (1 to {MAX_META_COLUMN_BYTES} ASCII letters, digits, '_', '-' or '.', starting with a letter)",
            name.chars().take(40).collect::<String>()
        ));
    }
    let folded: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    for own in ["path", "label", "split"] {
        if name == own {
            return Err(format!("{name:?} is one of the manifest's own columns"));
        }
        // One edit away, with the same first letter and no shorter: `spilt`, `splits`,
        // `lable`, but not `math`, `bath`, `babel`, `spit` or `pat`.
        let near = edit_distance(&folded, own) <= 1
            && folded.len() >= own.len()
            && folded.as_bytes().first() == own.as_bytes().first();
        if folded == own || near {
            return Err(format!(
                "the column {name:?} looks like the manifest's {own:?} column (they are lowercase: path, label, split); rename it if it is metadata"
            ));
        }
    }
    Ok(())
}

/// Edits (insert, delete, substitute, swap two neighbours) between two short ASCII words.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// Checks a metadata value: at most [`MAX_META_VALUE_BYTES`], no control or invisible
/// reordering character (values are printed), no NUL (HDF5 strings end at one).
pub fn check_meta_value(value: &str) -> std::result::Result<(), String> {
    if value.len() > MAX_META_VALUE_BYTES {
        return Err(format!(
            "{:?}... is {} bytes long; the limit is {MAX_META_VALUE_BYTES}",
            value.chars().take(40).collect::<String>(),
            value.len()
        ));
    }
    if let Some(c) = value.chars().find(|&c| is_unprintable(c)) {
        return Err(format!("{value:?} contains the control character {c:?}"));
    }
    Ok(())
}

/// A split's HDF5 output: `OUT/{split}.h5`.
pub const HDF5_SUFFIX: &str = ".h5";
/// A split's npy output folder: `OUT/{split}.npy.d/`.
pub const NPY_SUFFIX: &str = ".npy.d";
/// The npy folder's metadata file.
pub const NPY_META: &str = "meta.json";
/// The npy folder's spectrograms.
pub const NPY_MEL: &str = "mel.npy";
/// The npy folder's labels.
pub const NPY_LABEL: &str = "label.npy";

/// Whether `name` is a file melctl writes in an npy split folder.
pub fn is_npy_file(name: &str) -> bool {
    [NPY_META, NPY_MEL, NPY_LABEL].contains(&name)
}

/// HDF5 datasets and attributes (npy `meta.json` keys of the same meaning share the name,
/// but for the paths, which are `paths` there).
pub mod h5 {
    /// Dataset: the spectrograms, `[clips, ..., n_mels, frames]`.
    pub const MEL: &str = "mel";
    /// Dataset: each clip's class id.
    pub const LABEL: &str = "label";
    /// Dataset: each clip's path relative to the dataset root.
    pub const PATH: &str = "path";
    /// Datasets: per-mel-bin mean and standard deviation over the split.
    pub const MEL_MEAN: &str = "mel_mean";
    /// See [`MEL_MEAN`].
    pub const MEL_STD: &str = "mel_std";
    /// Datasets: each clip's source rate, channels and frames.
    pub const SOURCE_RATE: &str = "source_rate";
    /// See [`SOURCE_RATE`].
    pub const SOURCE_CHANNELS: &str = "source_channels";
    /// See [`SOURCE_RATE`].
    pub const SOURCE_FRAMES: &str = "source_frames";
    /// Root attribute: class names in id order.
    pub const LABEL_NAMES: &str = "label_names";
    /// Root attribute: values behind the statistics.
    pub const STATS_COUNT: &str = "stats_count";
    /// Root attribute: the resolved configuration, JSON.
    pub const CONFIG: &str = "config";
    /// Root attribute: the build this output belongs to.
    pub const BUILD_ID: &str = "build_id";
    /// Root attribute: the melctl version that wrote it.
    pub const MELCTL_VERSION: &str = "melctl_version";
    /// Root attribute: the split's name.
    pub const SPLIT: &str = "split";
    /// Root attribute: the names of `mel`'s axes, comma-separated.
    pub const MEL_DIMS: &str = "mel_dims";
    /// `mel` attribute: the stored dtype in words.
    pub const DTYPE: &str = "dtype";
    /// Group: one dataset of strings per metadata column, `meta/{column}`, one per clip.
    pub const META: &str = "meta";
    /// Root attribute: the metadata columns in order (absent: none).
    pub const META_COLUMNS: &str = "meta_columns";
}

/// The output name of split `split` for a sink writing `suffix` ([`HDF5_SUFFIX`] or
/// [`NPY_SUFFIX`]).
pub fn output_name(split: &str, suffix: &str) -> String {
    format!("{split}{suffix}")
}

/// The split an output name holds (`training.h5` → `training`), if it is one.
pub fn split_of_name(name: &str) -> Option<&str> {
    name.strip_suffix(HDF5_SUFFIX)
        .or_else(|| name.strip_suffix(NPY_SUFFIX))
}

/// The npy folder's `meta.json` keys. Those of the same meaning as an HDF5 name share it
/// ([`h5`]); these are the npy folder's own.
pub mod meta {
    pub use super::FORMAT_VERSION;
    pub use super::h5::{
        BUILD_ID, CONFIG, LABEL_NAMES, MEL_DIMS, MEL_MEAN, MEL_STD, MELCTL_VERSION,
        SOURCE_CHANNELS, SOURCE_FRAMES, SOURCE_RATE, SPLIT, STATS_COUNT,
    };
    /// Rows (clips) in the split.
    pub const ROWS: &str = "rows";
    /// Each clip's path relative to the dataset root (HDF5: the `path` dataset).
    pub const PATHS: &str = "paths";
    /// The stored dtype in words (HDF5: the `mel` dataset's `dtype` attribute).
    pub const DTYPE: &str = "dtype";
    /// How bf16 is stored, in words (empty for other dtypes).
    pub const DTYPE_NOTE: &str = "dtype_note";
    /// The metadata columns in order (HDF5: the root attribute of that name).
    pub const META_COLUMNS: &str = "meta_columns";
    /// The metadata, `{column: [value per clip]}` (HDF5: the `meta` group).
    pub const META: &str = "meta";
}

/// Checks a split or class name (folder names, manifest names, label map lines, and
/// the names a reader finds in a file all come here): it names output files and is
/// stored in every output and printed, so it must be non-empty, at most [`MAX_NAME_BYTES`], without path separators or `..`, not
/// start with `.` (hidden, and the form of melctl's own temporary and journal names,
/// `.NAME.partial-…`, `.NAME.resume`), and hold no control or bidirectional-formatting
/// character (terminal escapes). The error says what is wrong, the name escaped.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("\"\" is empty".into());
    }
    if let Some(c) = name.chars().find(|&c| is_unprintable(c)) {
        return Err(format!("{name:?} contains the control character {c:?}"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "{:?}... is {} bytes long; the limit is {MAX_NAME_BYTES}",
            name.chars().take(40).collect::<String>(),
            name.len()
        ));
    }
    if name == "." || name == ".." || name.contains("..") {
        return Err(format!("{name:?} contains \"..\" or is \".\""));
    }
    if name.contains(['/', '\\']) {
        return Err(format!("{name:?} contains a path separator"));
    }
    if name.starts_with('#') {
        return Err(format!(
            "{name:?} starts with '#', which a label map file reads as a comment (the class could not be named there)"
        ));
    }
    if name.starts_with('.') {
        return Err(format!(
            "{name:?} starts with '.', the form of hidden names and of melctl's own temporary files"
        ));
    }
    // `leak` and `leak ` would be two classes that print alike (as two Unicode forms of
    // one name would: check_distinct).
    if name.starts_with(char::is_whitespace) || name.ends_with(char::is_whitespace) {
        return Err(format!(
            "{name:?} begins or ends with white space, which does not show when it is printed; rename it without"
        ));
    }
    Ok(())
}

/// Control characters and the invisible ones that reorder or hide text on a terminal.
fn is_unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{061c}' | '\u{feff}')
}

/// Refuses a format version this reader does not know (`None`: written before versions,
/// read as 1).
pub fn check_version(found: Option<u64>) -> Result<(), String> {
    match found.unwrap_or(1) {
        1..=VERSION => Ok(()),
        v => Err(format!(
            "{FORMAT_VERSION} {v}, which this melctl does not read (it reads 1 to {VERSION}); read it with a newer melctl"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_up_to_this_one_are_read_and_later_ones_refused() {
        assert!(check_version(None).is_ok());
        assert!(check_version(Some(1)).is_ok());
        assert!(check_version(Some(VERSION)).is_ok());
        let e = check_version(Some(VERSION + 1)).unwrap_err();
        assert!(e.contains("does not read"), "{e}");
        assert!(check_version(Some(0)).is_err());
        assert_eq!(split_of_name("training.h5"), Some("training"));
        assert_eq!(split_of_name("training.npy.d"), Some("training"));
        assert_eq!(split_of_name("notes.txt"), None);
        assert_eq!(output_name("x", NPY_SUFFIX), "x.npy.d");
    }

    #[test]
    fn column_names_refuse_the_manifests_own_and_their_look_alikes() {
        for ok in [
            "speaker",
            "session_id",
            "mic-2",
            "take.1",
            "group",
            "pitch",
            "page",
            "math",
            "bath",
            "babel",
            "spit",
            "pat",
        ] {
            assert!(check_column_name(ok).is_ok(), "{ok}");
        }
        for own in ["path", "label", "split"] {
            assert!(check_column_name(own).unwrap_err().contains("own columns"));
        }
        for alike in [
            "Split", "SPLIT", "splits", "spilt", "lable", "Labels", "paths", "pat_h",
        ] {
            let e = check_column_name(alike).unwrap_err();
            assert!(e.contains("looks like"), "{alike}: {e}");
        }
        for bad in ["", "1st", "sp ace", "ü", "a/b", &"x".repeat(65)] {
            assert!(
                check_column_name(bad)
                    .unwrap_err()
                    .contains("not a column name"),
                "{bad}"
            );
        }
        assert!(check_meta_value("spk-01").is_ok());
        assert!(check_meta_value("").is_ok());
        assert!(
            check_meta_value("a\u{1b}[31m")
                .unwrap_err()
                .contains("control")
        );
        assert!(check_meta_value("a\0b").is_err());
        assert!(
            check_meta_value(&"x".repeat(1025))
                .unwrap_err()
                .contains("limit is 1024")
        );
    }
}
