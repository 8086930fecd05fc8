//! The RAM-preload loader: a whole split decoded in parallel into one contiguous
//! arena (one allocation, no per-clip buffers), then handed out as batches that
//! borrow from it.

use std::sync::Arc;

use mel_audio::FileEntry;

use crate::arena::ArenaLoader;
use crate::io::{DEFAULT_READ, load_clip, sort_outcomes};
use mel_core::spec::AudioConfig;
use mel_core::{Result, SourceInfo};
use rayon::prelude::*;

/// A split decoded into RAM: the arena loader over a vector of samples.
pub type PreloadLoader = ArenaLoader;

impl ArenaLoader {
    /// Decodes every file of `files` in the current rayon pool. `on_file` is called before
    /// each file; once it returns false the remaining files are not read and the load
    /// returns [`Error::Cancelled`](mel_core::Error::Cancelled) (an interrupt stops a large
    /// split at once). Files that fail are recorded (with path and reason) and left out;
    /// the others are compacted.
    pub fn load(
        files: &[FileEntry],
        audio: &AudioConfig,
        batch_clips: usize,
        on_file: &(dyn Fn() -> bool + Sync),
    ) -> Result<Self> {
        let clip_samples = audio.clip_samples();
        let mut arena = vec![0.0f32; files.len() * clip_samples];
        let outcomes: Vec<Result<SourceInfo>> = arena
            .par_chunks_mut(clip_samples.max(1))
            .zip(files.par_iter())
            .map_init(Vec::new, |buf, (row, file)| {
                if !on_file() {
                    return Err(mel_core::Error::Cancelled);
                }
                load_clip(&file.path, audio, DEFAULT_READ, row, buf)
            })
            .collect();
        let (ok, sources, failures) = sort_outcomes(outcomes, files)?;
        let indices: Vec<usize> = (0..files.len()).filter(|&i| ok[i]).collect();
        let kept = crate::arena::compact(&mut arena, clip_samples, &ok);
        arena.truncate(kept * clip_samples);
        arena.shrink_to_fit();
        let stats = mel_core::LoaderStats {
            workers: rayon::current_num_threads(),
            files: files.len() as u64,
            note: format!(
                "arena of {:.1} MB in RAM",
                (arena.len() * std::mem::size_of::<f32>()) as f64 / 1e6
            ),
            ..Default::default()
        };
        Ok(ArenaLoader {
            arena: Arc::new(arena),
            indices,
            sources,
            failures,
            clip_samples,
            batch_clips: batch_clips.max(1),
            next: 0,
            name: "preload",
            stats,
            outcome: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hound::{SampleFormat, WavSpec, WavWriter};
    use mel_core::AudioLoader;

    #[test]
    fn batches_cover_good_clips_in_order_and_failures_are_listed() {
        let t = tempfile::tempdir().unwrap();
        let audio = AudioConfig {
            sample_rate: 100,
            clip_seconds: 0.04,
            ..AudioConfig::default()
        };
        let spec = WavSpec {
            channels: 1,
            sample_rate: 100,
            bits_per_sample: 16,
            sample_format: SampleFormat::Int,
        };
        let mut files = Vec::new();
        for i in 0..5 {
            let path = t.path().join(format!("{i}.wav"));
            if i == 2 {
                std::fs::write(&path, b"garbage").unwrap();
            } else {
                let mut w = WavWriter::create(&path, spec).unwrap();
                for _ in 0..4 {
                    w.write_sample(i as i16 * 1000).unwrap();
                }
                w.finalize().unwrap();
            }
            files.push(FileEntry {
                meta: Default::default(),
                path,
                rel: format!("{i}.wav"),
                label: 0,
            });
        }
        let count = std::sync::atomic::AtomicUsize::new(0);
        let mut l = PreloadLoader::load(&files, &audio, 3, &|| {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            true
        })
        .unwrap();
        assert_eq!(count.into_inner(), 5);
        assert_eq!(l.clips(), 4);
        assert_eq!(l.arena_bytes(), 4 * 4 * 4);
        assert_eq!(l.failures().len(), 1);
        assert_eq!(l.failures()[0].index, 2);
        assert!(l.failures()[0].reason.contains("not a valid WAV"));
        let b1 = l.next_batch().unwrap().unwrap();
        assert_eq!(b1.indices, vec![0, 1, 3]);
        assert_eq!(b1.samples.samples()[4], 1000.0 / 32768.0);
        assert_eq!(b1.samples.samples()[8], 3000.0 / 32768.0);
        let b2 = l.next_batch().unwrap().unwrap();
        assert_eq!(b2.indices, vec![4]);
        assert!(l.next_batch().is_none());
    }
}
