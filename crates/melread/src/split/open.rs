//! Opening a split: which file a split's name means, the build record's check
//! ([`crate::commit`]), the opener of its format (`h5open` or `npy`), then the checks every
//! opened split passes (`checks`).

use std::path::Path;

use mel_core::{Error, Result};

use super::{OpenOptions, Split, checks, h5open, npy};
use crate::limits::bad;

impl Split {
    /// Opens the split `name` of the output folder `dir`: `dir/{name}.h5`, else
    /// `dir/{name}.npy.d/`.
    pub fn open_in(dir: impl AsRef<Path>, name: &str) -> Result<Split> {
        Self::open_in_with(dir, name, &OpenOptions::default())
    }

    /// [`open_in`](Self::open_in) with options.
    pub fn open_in_with(dir: impl AsRef<Path>, name: &str, opts: &OpenOptions) -> Result<Split> {
        let dir = dir.as_ref();
        // A split's name, not a path: `../other/training` opened another folder's split.
        if let Err(why) = mel_core::format::check_name(name) {
            return Err(bad(dir, format!("no split named that: the name {why}")));
        }
        let h5 = dir.join(mel_core::format::output_name(
            name,
            mel_core::format::HDF5_SUFFIX,
        ));
        let npy = dir.join(mel_core::format::output_name(
            name,
            mel_core::format::NPY_SUFFIX,
        ));
        // Whatever is at either name is opened, and refused if it is not a regular file
        // or a folder (a FIFO named `training.h5` is an error naming it, not a hang).
        if h5.exists() {
            Self::open_with(&h5, opts)
        } else if npy.exists() {
            Self::open_with(&npy, opts)
        } else {
            Err(bad(
                dir,
                format!(
                    "no split {name:?}: neither {} nor {} exists",
                    h5.display(),
                    npy.display()
                ),
            ))
        }
    }

    /// Opens a split from its `.h5` file or `.npy.d` folder.
    pub fn open(path: impl AsRef<Path>) -> Result<Split> {
        Self::open_with(path, &OpenOptions::default())
    }

    /// [`open`](Self::open) with options.
    pub fn open_with(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<Split> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path).map_err(|e| Error::read(path, e))?;
        crate::commit::check(path)?;
        let mut split = if meta.is_dir() {
            npy::open_npy(path, opts)?
        } else {
            h5open::open_hdf5(path, opts)?
        };
        checks::check_stats(&split)?;
        checks::check_strings(&split)?;
        let plan = checks::check_self_description(&split)?;
        if let Some(plan) = &plan
            && let Some(geometry) = plan.whole()
        {
            split.whole = Some(super::WholeIndex::build(
                &split,
                *geometry,
                plan.sample_rate(),
            )?);
        }
        if let Some(plan) = &plan
            && let Some(windows) = plan.windows()
        {
            split.windows = Some(super::WindowIndex::build(
                &split,
                *windows,
                plan.sample_rate(),
            )?);
        }
        Ok(split)
    }
}
