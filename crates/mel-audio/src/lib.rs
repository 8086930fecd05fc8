//! melctl's audio side: finding the clips of a dataset and decoding each into a
//! fixed-length mono f32 row.
#![warn(missing_docs)]

mod clip;
pub mod decode;
pub mod fingerprint;
pub mod folders;
mod framing;
pub mod groups;
pub mod manifest;
mod mix;
pub mod open;
pub mod resample;
pub mod scan;
mod sniff;
mod symphonia_read;
mod trim;
mod wav;

pub use decode::{
    DecodeInfo, decode_bytes_into, decode_bytes_whole, decode_into, decode_whole, fit_clip, probe,
    probe_length, quiet_decoder_panics,
};
pub use fingerprint::files_fingerprint;
pub use folders::{FolderOptions, scan_with};
pub use groups::{GroupPattern, Grouping};
pub use manifest::{ManifestOptions, check_label_names, from_manifest, read_label_map};
pub use open::open_input;
pub use scan::{Dataset, FileEntry, ScannedSplit, scan};
