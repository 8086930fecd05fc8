//! Speed and ratio of the compressed-chunk codec on one core: byte shuffle + libdeflate
//! (zlib streams, as `hdf5.gzip` stores them) over chunks of an existing output.
//!
//! `cargo run --release -p mel-sinks --example deflate_speed -- MEL.bin [CHUNK_BYTES]`
//! where MEL.bin holds raw f16 values, e.g. from h5py:
//! `open("mel.bin", "wb").write(h5py.File("OUT/training.h5")["mel"][:].tobytes())`.
//! CHUNK_BYTES defaults to 16 leak-4k clips (16 × 75,840).

use std::time::Instant;

use libdeflater::{CompressionLvl, Compressor};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: deflate_speed MEL.bin [CHUNK_BYTES]");
        std::process::exit(2);
    };
    let raw = std::fs::read(&path).expect("the input file reads");
    let chunk: usize = args
        .next()
        .map_or(16 * 75_840, |c| c.parse().expect("a byte count"));
    let n = raw.len() / chunk * chunk;
    let mut shuffled = vec![0u8; chunk];
    for level in [1, 2, 4, 6] {
        let mut c = Compressor::new(CompressionLvl::new(level).expect("level 1-12"));
        let mut out = vec![0u8; c.zlib_compress_bound(chunk)];
        let t = Instant::now();
        let mut stored = 0usize;
        for piece in raw[..n].chunks_exact(chunk) {
            // HDF5's shuffle for 2-byte elements: all low bytes, then all high bytes.
            let half = chunk / 2;
            for (i, e) in piece.chunks_exact(2).enumerate() {
                shuffled[i] = e[0];
                shuffled[half + i] = e[1];
            }
            stored += c.zlib_compress(&shuffled, &mut out).expect("bound fits");
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "libdeflate {level}: {:.0} MB in {s:.2} s = {:.0} MB/s per core, ratio {:.3}",
            n as f64 / 1e6,
            n as f64 / s / 1e6,
            n as f64 / stored as f64
        );
    }
}
