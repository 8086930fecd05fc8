//! Widening stored f16 runs to f32 with the finite check: `melread::widen` against
//! `half`'s slice conversion followed by a pass testing the f32 values (what the reader
//! did before), on the runs a whole-clip read makes (one run per mel bin per block of
//! `BLOCK` frames; a block as long as the clip is one run per bin). Interleaved rounds;
//! prints the best ns per value of each.
//!
//! ```text
//! cargo run --release -p melread --example widen_bench -- [BLOCK] [ROUNDS]
//! ```

use std::hint::black_box;
use std::time::Instant;

use half::f16;
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};

/// The reader's former path: bytes to aligned bits, `half`'s conversion, then a pass over
/// the f32 values testing for an all-ones exponent.
fn with_half(src: &[u8], dst: &mut [f32], scratch: &mut Vec<u16>) -> bool {
    let bits: &[u16] = match bytemuck::try_cast_slice::<u8, u16>(src) {
        Ok(v) => v,
        Err(_) => {
            scratch.clear();
            scratch.extend(
                src.chunks_exact(2)
                    .map(|b| u16::from_le_bytes([b[0], b[1]])),
            );
            scratch
        }
    };
    bits.reinterpret_cast::<f16>().convert_to_f32_slice(dst);
    dst.iter().fold(0u32, |a, v| {
        a | u32::from(v.to_bits() & 0x7f80_0000 == 0x7f80_0000)
    }) == 0
}

/// A clip of `frames` frames × 80 mel bins stored as blocks of `block` frames (`[80,
/// block]` each, mel-major), read into `[80, frames]` rows by each method; `which`: 0
/// `half` per run, 1 `widen::f16_into` per run, 2 `widen::f16_runs_into` per block.
fn read_clip(stored: &[u8], out: &mut [f32], (frames, block): (usize, usize), which: u8) -> bool {
    let m = 80;
    let mut scratch = Vec::new();
    let mut ok = true;
    for (k, blk) in stored.chunks(2 * m * block).enumerate() {
        let len = block.min(frames - k * block);
        let dst = &mut out[k * block..];
        if which == 2 {
            let runs = melread::widen::Runs {
                rows: m,
                len,
                src_stride: block,
                dst_stride: frames,
            };
            ok &= melread::widen::f16_runs_into(black_box(blk), dst, runs);
            continue;
        }
        for b in 0..m {
            let s = &blk[2 * b * block..2 * (b * block + len)];
            let d = &mut dst[b * frames..b * frames + len];
            ok &= if which == 0 {
                with_half(black_box(s), d, &mut scratch)
            } else {
                melread::widen::f16_into(black_box(s), d)
            };
        }
    }
    ok
}

fn main() {
    let mut args = std::env::args().skip(1);
    let block: usize = args.next().map_or(32, |a| a.parse().expect("BLOCK"));
    let rounds: usize = args.next().map_or(7, |a| a.parse().expect("ROUNDS"));
    // A clip of 352 frames (the speech corpus's mean) × 80 mel bins.
    let frames: usize = 352;
    let blocks = frames.div_ceil(block);
    let stored: Vec<u8> = (0..blocks * block * 80)
        .flat_map(|k| {
            f16::from_f32((k % 97) as f32 * -0.75)
                .to_bits()
                .to_le_bytes()
        })
        .collect();
    let mut out = vec![0f32; frames * 80];
    let reps = 400;
    let mut best = [f64::MAX; 3];
    for _ in 0..rounds {
        for which in 0..3u8 {
            let t = Instant::now();
            for _ in 0..reps {
                black_box(read_clip(&stored, &mut out, (frames, block), which));
            }
            let ns = t.elapsed().as_nanos() as f64 / (reps * frames * 80) as f64;
            best[which as usize] = best[which as usize].min(ns);
        }
    }
    println!(
        "blocks of {block} frames, a clip of {frames} × 80: half per run + finite pass {:.3} ns/value, widen::f16_into per run {:.3}, widen::f16_runs_into per block {:.3} ({:.1}× half)",
        best[0],
        best[1],
        best[2],
        best[0] / best[2]
    );
}
