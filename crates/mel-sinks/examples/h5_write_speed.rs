//! How fast the HDF5 sink writes leak-4k batches, per layout, with and without the
//! final fsync: `h5_write_speed [CLIPS] [DIR]`.

use std::time::Instant;

use mel_core::{ClipMeta, Config, MelPlan, OutputBuf, Sink, SinkSpec};
use mel_sinks::{Hdf5Options, Hdf5Sink};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clips: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4096);
    let dir = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "target/h5speed".into());
    std::fs::create_dir_all(&dir)?;
    for chunk in [1usize, 16, 0] {
        let mut config = Config::default();
        config.hdf5.chunk_clips = chunk;
        let plan = MelPlan::from_config(&config)?;
        let batch = 256;
        let mut data = OutputBuf::zeros(plan.dtype(), batch * plan.values_per_clip());
        for i in 0..data.len() {
            if let OutputBuf::F16(v) = &mut data {
                v[i] = half::f16::from_f32(-((i % 97) as f32));
            }
        }
        let meta: Vec<ClipMeta> = (0..batch)
            .map(|i| ClipMeta {
                meta: Default::default(),
                index: i,
                source: mel_core::SourceInfo::default(),
                label: (i % 5) as i64,
                path: format!("class/clip-{i:06}.wav"),
            })
            .collect();
        let spec = SinkSpec {
            meta_columns: vec![],
            split: format!("chunk{chunk}"),
            rows: clips,
            plan: plan.clone(),
            label_names: vec!["a".into()],
            provenance: config.resolved_json(),
        };
        let t0 = Instant::now();
        let path = std::path::Path::new(&dir).join(format!("{}.h5", spec.split));
        let mut sink = Box::new(Hdf5Sink::create(
            &path,
            spec,
            Hdf5Options {
                chunk_clips: chunk,
                gzip: 0,
                fsync: config.output.fsync,
                writers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            },
        )?);
        for first in (0..clips).step_by(batch) {
            let n = batch.min(clips - first);
            let mut d = data.clone();
            d.resize(n * plan.values_per_clip());
            sink.write(first, &meta[..n], &d)?;
        }
        let t1 = Instant::now();
        sink.finish(clips)?.publish()?;
        let t2 = Instant::now();
        let gb = (clips * plan.bytes_per_clip()) as f64 / 1e9;
        println!(
            "chunk_clips {chunk:>2}: writes {:.3} s ({:.2} GB/s), commit (metadata + fsync + rename) {:.3} s",
            (t1 - t0).as_secs_f64(),
            gb / (t1 - t0).as_secs_f64(),
            (t2 - t1).as_secs_f64()
        );
    }
    Ok(())
}
