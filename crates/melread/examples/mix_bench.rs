//! Mixup's cost on whole-clip buckets: widening a pair's stored f16 blocks and mixing
//! them in a pass after (the loader's way before `widen_mixed`, four blocks at a time),
//! against `widen_mixed::group_mixed_into` (both members' runs widened and mixed in
//! registers; checked bit-identical to the first here), against widening alone.
//! Clips of 50–600 frames × 80 bins in blocks of 32 frames, ~200 MB stored (past the
//! caches), batches of ≤ 8000 frames of similar lengths; interleaved rounds, best ns per
//! value of each. Unnormalised too: widening alone and mixed, the values kept as stored
//! or given a gain (one add a value), the floor of a gain's cost without normalisation.
//!
//! ```text
//! cargo run --release -p melread --example mix_bench -- [ROUNDS] [map]
//! ```
//!
//! `map`: the stored values read from a file's memory map (as the loader reads a split)
//! rather than from the heap.

use std::hint::black_box;
use std::time::Instant;

use melread::widen::{RowMap, Runs, runs_mapped_into};

/// One way of filling a batch: the store, the batch's clips and width, the output, the maps.
type Arm<'a> = &'a dyn Fn(&Store, (&[usize], usize), &mut [f32], &[RowMap]);

const M: usize = 80;
const B: usize = 32;

struct Store {
    bytes: &'static [u8],
    /// Byte offset of each clip, and its frames.
    at: Vec<usize>,
    frames: Vec<usize>,
}

fn store(clips: usize) -> Store {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut frames: Vec<usize> = (0..clips).map(|_| 50 + (next() % 551) as usize).collect();
    frames.sort_unstable();
    let mut at = Vec::new();
    let mut bytes = Vec::new();
    for &f in &frames {
        at.push(bytes.len());
        let blocks = f.div_ceil(B);
        for _ in 0..blocks * M * B {
            let v = half::f16::from_f32((next() % 2000) as f32 * 0.05 - 80.0);
            bytes.extend(v.to_bits().to_le_bytes());
        }
    }
    Store {
        bytes: bytes.leak(),
        at,
        frames,
    }
}

/// Buckets: consecutive clips (sorted by length) up to 8000 frames padded.
fn batches(s: &Store) -> Vec<(Vec<usize>, usize)> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for (c, &f) in s.frames.iter().enumerate() {
        if (cur.len() + 1) * f > 8000 {
            out.push((std::mem::take(&mut cur), s.frames[c - 1]));
        }
        cur.push(c);
    }
    let w = s.frames[*cur.last().unwrap()];
    out.push((cur, w));
    out
}

fn maps(gain: f32) -> Vec<RowMap> {
    (0..M)
        .map(|b| RowMap::Normalise {
            shift: -40.0 + b as f32 * 0.1,
            scale: 1.0 / (10.0 + b as f32 * 0.01),
            add: gain,
        })
        .collect()
}

/// Clip `c`'s stored rows from its block `k` to its end, as the loader reads a clip (the
/// kernels' prefetches reach on into the next block).
fn rest(s: &Store, c: usize, k: usize) -> &'static [u8] {
    let end = s.at[c] + s.frames[c].div_ceil(B) * M * B * 2;
    &s.bytes[s.at[c] + k * M * B * 2..end]
}

/// Frames `c0..c1` of clip `c` into its item `dst` (rows of `width`), padding zero.
fn widen(
    s: &Store,
    c: usize,
    dst: &mut [f32],
    width: usize,
    (c0, c1): (usize, usize),
    m: &[RowMap],
) {
    // One map for every row (as the kernel takes it) as one a row, as widening takes it.
    let one = m.first().map(|&x| [x; M]);
    let m = match (m.len(), &one) {
        (1, Some(all)) => &all[..],
        _ => m,
    };
    let real = s.frames[c];
    let mut f = c0;
    while f < c1.min(real) {
        let (k, lo) = (f / B, f % B);
        let len = (B - lo).min(c1.min(real) - f);
        let blk = rest(s, c, k);
        let runs = Runs {
            rows: M,
            len,
            src_stride: B,
            dst_stride: width,
        };
        runs_mapped_into(false, &blk[2 * lo..], &mut dst[f..], runs, m);
        f += len;
    }
    let filled = real.clamp(c0, c1);
    if filled < c1 {
        for r in 0..M {
            dst[r * width + filled..r * width + c1].fill(0.0);
        }
    }
}

#[target_feature(enable = "avx")]
fn mix_pair(x: &mut [f32], y: &mut [f32], (wx, wy): (f32, f32)) {
    for (a, b) in x.iter_mut().zip(y.iter_mut()) {
        let (u, v) = (*a, *b);
        *a = wx * u + (1.0 - wx) * v;
        *b = wy * v + (1.0 - wy) * u;
    }
}

fn batch_apart(
    s: &Store,
    (ids, width): (&[usize], usize),
    out: &mut [f32],
    mix: bool,
    m: &[RowMap],
) {
    let per = M * width;
    for pair in ids.chunks(2).enumerate() {
        let (g, pair) = pair;
        let step = if mix && pair.len() == 2 { 4 * B } else { width };
        for c0 in (0..width).step_by(step) {
            let c1 = (c0 + step).min(width);
            for (k, &c) in pair.iter().enumerate() {
                let j = 2 * g + k;
                widen(s, c, &mut out[j * per..(j + 1) * per], width, (c0, c1), m);
            }
            if mix && pair.len() == 2 {
                let j = 2 * g;
                let (x, y) = out[j * per..(j + 2) * per].split_at_mut(per);
                for r in 0..M {
                    let (a, b) = (
                        &mut x[r * width + c0..r * width + c1],
                        &mut y[r * width + c0..r * width + c1],
                    );
                    // SAFETY: benchmark on a machine with AVX.
                    unsafe { mix_pair(a, b, (0.3, 0.6)) };
                }
            }
        }
    }
}

fn batch_fused(s: &Store, (ids, width): (&[usize], usize), out: &mut [f32], m: &[RowMap]) {
    let per = M * width;
    for (g, pair) in ids.chunks(2).enumerate() {
        if pair.len() == 1 {
            let j = 2 * g;
            widen(
                s,
                pair[0],
                &mut out[j * per..(j + 1) * per],
                width,
                (0, width),
                m,
            );
            continue;
        }
        let (a, b) = (pair[0], pair[1]);
        let common = s.frames[a].min(s.frames[b]);
        let j = 2 * g;
        let (x, y) = out[j * per..(j + 2) * per].split_at_mut(per);
        let mut f = 0;
        while f < common {
            let k = f / B;
            let len = B.min(common - f);
            let xs = rest(s, a, k);
            let ys = rest(s, b, k);
            use melread::widen_mixed::{Member, MixRuns, group_mixed_into};
            let mem = |src| Member {
                src,
                stride: B,
                maps: m,
                weight: 0.0,
                keep: &[],
                jump: None,
            };
            // The frames after this run are written after it.
            let runs = MixRuns {
                rows: M,
                len,
                dst_stride: width,
                slack: width - f - len,
                prefetch: true,
            };
            group_mixed_into(
                [
                    Member {
                        weight: 0.3,
                        ..mem(xs)
                    },
                    Member {
                        weight: 0.6,
                        ..mem(ys)
                    },
                ],
                [&mut x[f..], &mut y[f..]],
                runs,
            );
            f += len;
        }
        // The rest (one member longer): widened then mixed apart (rare in buckets).
        if common < width {
            widen(s, a, x, width, (common, width), m);
            widen(s, b, y, width, (common, width), m);
            for r in 0..M {
                let (p, q) = (
                    &mut x[r * width + common..(r + 1) * width],
                    &mut y[r * width + common..(r + 1) * width],
                );
                // SAFETY: AVX.
                unsafe { mix_pair(p, q, (0.3, 0.6)) };
            }
        }
    }
}

fn main() {
    let rounds: usize = std::env::args().nth(1).map_or(7, |a| a.parse().unwrap());
    let mut s = store(4800);
    if std::env::args().nth(2).is_some_and(|a| a == "map") {
        // The stored values in a file's pages, as the loader reads a split.
        let path = std::env::temp_dir().join("mix_bench.bin");
        std::fs::write(&path, s.bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: a file this benchmark wrote and nothing else changes.
        let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
        s.bytes = Box::leak(Box::new(map));
    }
    let bs = batches(&s);
    let values: usize = bs.iter().map(|(ids, _)| ids.len()).sum::<usize>();
    let most = bs.iter().map(|(ids, w)| ids.len() * w * M).max().unwrap();
    let mut out = vec![0f32; most];
    let m = maps(1.5);
    let real: usize = s.frames.iter().sum::<usize>() * M;
    println!(
        "{} clips, {} batches, {:.0} MB stored, {} real values",
        values,
        bs.len(),
        s.bytes.len() as f64 / 1e6,
        real
    );
    let mut check = vec![0f32; most];
    for (ids, w) in &bs {
        let n = ids.len() * w * M;
        batch_apart(&s, (ids, *w), &mut out, true, &m);
        batch_fused(&s, (ids, *w), &mut check, &m);
        assert!(
            out[..n]
                .iter()
                .zip(&check[..n])
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "fused differs"
        );
    }
    // Unnormalised: each value kept as stored, or given a gain (one add a value).
    let gained: Vec<RowMap> = (0..M).map(|_| RowMap::Add(1.5)).collect();
    let arms: [(&str, Arm); 8] = [
        ("widen only", &|s, b, o, m| batch_apart(s, b, o, false, m)),
        ("mixed apart", &|s, b, o, m| batch_apart(s, b, o, true, m)),
        ("widen_mixed", &|s, b, o, m| batch_fused(s, b, o, m)),
        ("widen, kept", &|s, b, o, _| {
            batch_apart(s, b, o, false, &[])
        }),
        ("widen, gain", &|s, b, o, _| {
            batch_apart(s, b, o, false, &gained)
        }),
        ("widen_mixed, kept", &|s, b, o, _| batch_fused(s, b, o, &[])),
        ("widen_mixed, gain", &|s, b, o, _| {
            batch_fused(s, b, o, &gained)
        }),
        // One map for every run, as the loader gives a member whose bins share one.
        ("widen_mixed, one gain", &|s, b, o, _| {
            batch_fused(s, b, o, &gained[..1])
        }),
    ];
    let mut best = [f64::MAX; 8];
    for _ in 0..rounds {
        for ((_, arm), best) in arms.iter().zip(&mut best) {
            let t = Instant::now();
            for (ids, w) in &bs {
                arm(&s, (ids, *w), &mut out, &m);
                black_box(&out);
            }
            *best = best.min(t.elapsed().as_secs_f64() * 1e9 / real as f64);
        }
    }
    for ((name, _), b) in arms.iter().zip(best) {
        println!(
            "{name}: {b:.3} ns a value ({:+.0}%)",
            100.0 * (b / best[0] - 1.0)
        );
    }
}
