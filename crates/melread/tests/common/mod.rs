//! Test datasets: leak-like clips of five classes (melctl demo's recipe), computed by
//! melkit's CPU backend and written by melctl's own sinks, exactly as `melctl build`
//! lays them out.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use mel_core::{ClipMeta, Sink, SinkSpec, SourceInfo};
use melkit::sinks::{Hdf5Options, Hdf5Sink, NpyOptions, NpySink};
use melkit::{BackendKind, BackendRequest, Config, Dtype, Extractor, MelPlan, OutputBuf, Preset};

pub use melkit::demo::CLASSES;

/// Where a split is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out {
    /// `{split}.h5`, contiguous (`chunk_clips` 0) or chunked, deflated at `gzip` (0: not).
    Hdf5 { chunk_clips: usize, gzip: u8 },
    /// `{split}.npy.d/`.
    Npy,
}

/// One clip of `class`, `n` samples at `rate` Hz (melctl demo's five sounds), quantised to
/// 16 bits as the demo's WAV files are.
pub fn synth(class: usize, n: usize, rate: f64, seed: u64) -> Vec<f32> {
    melkit::demo::synth(class, n, rate, seed)
        .into_iter()
        .map(|v| ((v * 32767.0).round() / 32768.0) as f32)
        .collect()
}

/// Builds `splits` (name, clips) of `preset` at `dtype` into `out_dir`; clip `k` of a
/// split has class `k % 5`. Returns the folder.
pub fn build(
    out_dir: &Path,
    preset: Preset,
    dtype: Dtype,
    out: Out,
    splits: &[(&str, usize)],
) -> PathBuf {
    build_with_ids(out_dir, preset, dtype, out, splits, &|class| class)
}

/// [`build`] of leak-4k clips into contiguous, uncompressed HDF5 splits: the layout most
/// tests read.
pub fn build_leak(out_dir: &Path, dtype: Dtype, splits: &[(&str, usize)]) -> PathBuf {
    let out = Out::Hdf5 {
        chunk_clips: 0,
        gzip: 0,
    };
    build(out_dir, Preset::Leak4k, dtype, out, splits)
}

/// [`build`], with class `c` (the sound of `CLASSES[c]`) stored as label id `id(c)`, and
/// label names ordered to match (`label_names[id(c)] = CLASSES[c]`): a label map other
/// than the sorted one.
pub fn build_with_ids(
    out_dir: &Path,
    preset: Preset,
    dtype: Dtype,
    out: Out,
    splits: &[(&str, usize)],
    id: &dyn Fn(usize) -> usize,
) -> PathBuf {
    std::fs::create_dir_all(out_dir).unwrap();
    let mut label_names = vec![String::new(); CLASSES.len()];
    for (c, name) in CLASSES.iter().enumerate() {
        label_names[id(c)] = name.to_string();
    }
    let mut config: Config = preset.config();
    config.output.dtype = dtype;
    config.output.fsync = false;
    let plan = MelPlan::from_config(&config).unwrap();
    let mut extractor =
        Extractor::new(&config.spec(), &BackendRequest::of(BackendKind::Cpu)).unwrap();
    let n = plan.clip_samples();
    let mut seed = 0u64;
    for &(split, clips) in splits {
        let spec = SinkSpec {
            meta_columns: vec![],
            split: split.to_string(),
            rows: clips,
            plan: plan.clone(),
            label_names: label_names.clone(),
            provenance: config.resolved_json(),
        };
        let mut sink: Box<dyn Sink> = match out {
            Out::Hdf5 { chunk_clips, gzip } => Box::new(
                Hdf5Sink::create(
                    &out_dir.join(mel_core::format::output_name(
                        &spec.split,
                        mel_core::format::HDF5_SUFFIX,
                    )),
                    spec,
                    Hdf5Options {
                        chunk_clips,
                        gzip,
                        fsync: false,
                        writers: 2,
                    },
                )
                .unwrap(),
            ),
            Out::Npy => {
                let dir = out_dir.join(mel_core::format::output_name(
                    &spec.split,
                    mel_core::format::NPY_SUFFIX,
                ));
                Box::new(NpySink::create(&dir, spec, NpyOptions { fsync: false }).unwrap())
            }
        };
        let batch = 8;
        for first in (0..clips).step_by(batch) {
            let rows = batch.min(clips - first);
            let mut samples = Vec::with_capacity(rows * n);
            let mut metas = Vec::with_capacity(rows);
            for k in first..first + rows {
                seed += 1;
                let class = k % CLASSES.len();
                samples.extend(synth(class, n, plan.sample_rate() as f64, seed));
                metas.push(ClipMeta {
                    meta: Default::default(),
                    index: k,
                    label: id(class) as i64,
                    path: format!("{split}/{}/{split}_{k:06}.wav", CLASSES[class]),
                    source: SourceInfo {
                        rate: plan.sample_rate(),
                        channels: 1,
                        frames: n as u64,
                    },
                });
            }
            let features = extractor.clips(&samples).unwrap();
            let data: &OutputBuf = features.values();
            sink.write(first, &metas, data).unwrap();
        }
        sink.finish(clips).unwrap().publish().unwrap();
    }
    out_dir.to_path_buf()
}

/// The values `build` stores for clip `k` of a split whose clips started at seed
/// `first_seed` (widened to f32): recomputed, for comparisons.
pub fn expected_clip(preset: Preset, dtype: Dtype, class: usize, seed: u64) -> Vec<f32> {
    let mut config: Config = preset.config();
    config.output.dtype = dtype;
    let plan = MelPlan::from_config(&config).unwrap();
    let mut extractor =
        Extractor::new(&config.spec(), &BackendRequest::of(BackendKind::Cpu)).unwrap();
    let samples = synth(class, plan.clip_samples(), plan.sample_rate() as f64, seed);
    extractor
        .clips(&samples)
        .unwrap()
        .to_f32()
        .iter()
        .copied()
        .collect()
}

/// Runs python3 with `script` and `args`; its stdout. Fails the test with the command's
/// output if python3 (with numpy and h5py) is missing or the script fails.
pub fn python(script: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect(
            "python3 runs (the checks need python3 with numpy and h5py: pip install numpy h5py)",
        );
    assert!(
        out.status.success(),
        "python3 failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
