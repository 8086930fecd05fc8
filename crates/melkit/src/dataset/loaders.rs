//! Which loader each split gets (`run.loader`, resolved), and building it lazily so its
//! up-front work (a preload, a cache build) runs inside the pipeline's load stage.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mel_audio::{Dataset, FileEntry, ScannedSplit};
use mel_core::config::LoaderKind;
use mel_core::{AudioLoader, Config};
use mel_loaders::pool::SpareBuffers;
use mel_loaders::{CacheKey, CacheLoader, Lazy, PreloadLoader, StreamLoader};

use super::error::{Error, Result};

/// Refuses a preload when the arena of any of `splits` would not fit in `available`
/// bytes of memory (`None`: unknown, not refused).
pub(super) fn check_preloads<'a>(
    config: &Config,
    splits: impl IntoIterator<Item = &'a ScannedSplit>,
    available: Option<u64>,
) -> Result<()> {
    if config.run.loader != LoaderKind::Preload {
        return Ok(());
    }
    for split in splits {
        let decoded = (split.files.len() * config.audio.clip_samples() * 4) as u64;
        mel_loaders::select::check_preload(decoded, available).map_err(|reason| Error::Split {
            split: split.name.clone(),
            reason,
        })?;
    }
    Ok(())
}

/// `run.loader` resolved for a split of `files`, and the cache key when one is needed
/// (the cache lives under `cache_dir`).
pub(super) fn loader_choice(
    dataset: &Dataset,
    split: &str,
    files: &[FileEntry],
    config: &Config,
    cache_dir: &Path,
) -> Result<(mel_loaders::LoaderChoice, Option<CacheKey>)> {
    let needs_key = matches!(config.run.loader, LoaderKind::Auto | LoaderKind::Memmap);
    let key = if needs_key {
        Some(CacheKey::new(
            cache_dir,
            &dataset.root,
            split,
            files,
            &config.audio,
        )?)
    } else {
        None
    };
    let cache_exists = key.as_ref().is_some_and(|k| k.path.exists());
    let choice = mel_loaders::choose(config.run.loader, cache_exists);
    Ok((choice, key))
}

/// How the streaming loaders read files (`run.stream`).
pub(super) fn read_options(config: &Config) -> mel_loaders::io::ReadOptions {
    let s = &config.run.stream;
    mel_loaders::io::ReadOptions {
        read_size: s.read_size,
        noatime: s.noatime,
        fadvise: s.fadvise,
    }
}

/// The loader's words: which one and why.
pub(super) fn describe(choice: &mel_loaders::LoaderChoice) -> String {
    format!("{} ({})", choice.kind.name(), choice.reason)
}

/// What a build's loaders share: the cache folder, the thread count, the interrupt flag
/// and the streaming loaders' batch buffers.
pub(super) struct LoaderEnv<'a> {
    pub cache_dir: &'a Path,
    pub threads: usize,
    pub cancel: &'a Arc<AtomicBool>,
    pub spares: &'a SpareBuffers,
}

/// Resolves `run.loader` for `split` and builds the loader (lazily: its up-front work runs
/// inside the pipeline's load stage). Returns it with a line saying which and why.
pub(super) fn make_loader(
    dataset: &Dataset,
    split: &str,
    files: Vec<FileEntry>,
    config: &Config,
    env: &LoaderEnv<'_>,
) -> Result<(Box<dyn AudioLoader>, String)> {
    let LoaderEnv {
        cache_dir,
        threads,
        cancel,
        spares,
    } = *env;
    let audio = config.audio.clone();
    let stop = cancel.clone();
    // Called before each file a preload or a cache build decodes: an interrupt stops it.
    let on_file = move || !stop.load(Ordering::Relaxed);
    let batch = config.run.batch_clips;
    let (choice, key) = loader_choice(dataset, split, &files, config, cache_dir)?;
    let line = describe(&choice);
    let loader: Box<dyn AudioLoader> = match choice.kind {
        LoaderKind::Preload => Box::new(Lazy::new("preload", move || {
            Ok(
                Box::new(PreloadLoader::load(&files, &audio, batch, &on_file)?)
                    as Box<dyn AudioLoader>,
            )
        })),
        LoaderKind::Memmap => {
            let key = key.expect("a key for memmap");
            Box::new(Lazy::new("memmap", move || {
                Ok(
                    Box::new(CacheLoader::open(&key, &files, &audio, batch, &on_file)?)
                        as Box<dyn AudioLoader>,
                )
            }))
        }
        LoaderKind::Stream | LoaderKind::Auto => Box::new(
            StreamLoader::start(
                files,
                &audio,
                batch,
                threads,
                &config.run.stream,
                mel_core::pipeline::batches_in_flight(config.run.queue_depth),
            )?
            .with_spares(spares.clone()),
        ),
    };
    Ok((loader, line))
}
