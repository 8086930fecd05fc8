//! Where a build writes: each split's output path, the sink that writes it, and every
//! path a build writes, for the output guard.

use std::path::{Path, PathBuf};

use mel_audio::Dataset;
use mel_core::config::SinkKind;
use mel_core::outputs::{Guard, Output, Written};
use mel_core::{Config, Sink, SinkSpec};
use mel_sinks::{Hdf5Options, Hdf5Sink, NpyOptions, NpySink};

use super::BuildSettings;
use super::error::Result;

/// The sink `output.sink` names, for `spec`, under `out`, writing with `threads` threads
/// and marking the output as build `build_id`'s.
pub(super) fn make_sink(
    config: &Config,
    out: &Path,
    spec: SinkSpec,
    threads: usize,
    build_id: &str,
) -> Result<Box<dyn Sink>> {
    // The one place a split's path is decided; the sink is handed it.
    let path = final_path(config, out, &spec.split);
    Ok(match config.output.sink {
        SinkKind::Hdf5 => Box::new(
            Hdf5Sink::create(
                &path,
                spec,
                Hdf5Options {
                    chunk_clips: config.hdf5.chunk_clips,
                    gzip: config.hdf5.gzip,
                    fsync: config.output.fsync,
                    writers: threads,
                },
            )?
            .with_build(build_id),
        ),
        SinkKind::Npy => Box::new(
            NpySink::create(
                &path,
                spec,
                NpyOptions {
                    fsync: config.output.fsync,
                },
            )?
            .with_build(build_id),
        ),
    })
}

/// Every path a build of `dataset`'s chosen splits into `out` writes, with what it is:
/// the splits' outputs, the build record and, when resuming, the journals.
pub(super) fn planned_outputs(
    dataset: &Dataset,
    settings: &BuildSettings,
    out: &Path,
) -> Vec<Output> {
    let mut outputs = Vec::new();
    for split in dataset.splits.iter().filter(|s| settings.builds(&s.name)) {
        let what = format!("the output of split {}", split.name);
        outputs.push(split_output(&settings.config, out, &split.name, what));
        // A resumed build writes the journal; a plain one deletes what is there: either
        // way it is replaced whole.
        outputs.push(
            Output::new(
                mel_sinks::journal::journal_dir(out, &split.name),
                format!("the resume journal of split {}", split.name),
                Written::Folder,
            )
            .holding(mel_sinks::journal::is_journal_file),
        );
    }
    outputs.push(Output::new(
        mel_core::record::path(out),
        "the build record",
        Written::File,
    ));
    outputs
}

/// Split `split`'s output under `out`, described as `what`, as the guard checks it: a
/// file replaced whole, or an npy folder holding only melctl's files.
pub(super) fn split_output(config: &Config, out: &Path, split: &str, what: String) -> Output {
    let path = final_path(config, out, split);
    match config.output.sink {
        SinkKind::Hdf5 => Output::new(path, what, Written::File),
        SinkKind::Npy => {
            Output::new(path, what, Written::Folder).holding(mel_core::format::is_npy_file)
        }
    }
}

/// Protects every audio file of `dataset` (all splits: building some splits still must
/// not replace another split's input).
pub(super) fn protect_inputs(guard: &mut Guard, dataset: &Dataset) {
    for f in dataset.splits.iter().flat_map(|s| &s.files) {
        guard.input(&f.path, "an input of this build");
    }
}

/// Where the sink `output.sink` names puts split `split` under `out`.
pub fn final_path(config: &Config, out: &Path, split: &str) -> PathBuf {
    use mel_core::format::{HDF5_SUFFIX, NPY_SUFFIX, output_name};
    match config.output.sink {
        SinkKind::Hdf5 => out.join(output_name(split, HDF5_SUFFIX)),
        SinkKind::Npy => out.join(output_name(split, NPY_SUFFIX)),
    }
}

/// Refuses a split name in `only` the dataset does not have, listing those it has.
pub fn check_split_names(dataset: &Dataset, only: &[String]) -> mel_core::Result<()> {
    for name in only {
        if !dataset.splits.iter().any(|s| &s.name == name) {
            let known: Vec<_> = dataset.splits.iter().map(|s| s.name.as_str()).collect();
            return Err(mel_core::Error::Dataset {
                root: dataset.root.clone(),
                reason: format!("no split named {name:?} (found: {})", known.join(", ")),
            });
        }
    }
    Ok(())
}
