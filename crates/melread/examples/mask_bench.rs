//! SpecAugment's masks on whole-clip buckets: widening each item then masking it in a
//! pass after (the loader's way before `widen::Zeros`), against masking in the widening's
//! registers (`runs_masked_into`; checked bit-identical to the first here), against
//! widening alone. Clips of 50–600 frames × 80 bins in blocks of 32 frames (~200 MB
//! stored, past the caches), batches of ≤ 8000 frames of similar lengths, two time masks
//! of up to 20 frames and two frequency masks of up to 8 bins an item; interleaved
//! rounds, best ns per value of each.
//!
//! ```text
//! cargo run --release -p melread --example mask_bench -- [ROUNDS]
//! ```

use std::hint::black_box;
use std::time::Instant;

use melread::widen::{RowMap, Runs, Zeros, runs_masked_into, set_rows};

const M: usize = 80;
const B: usize = 32;

/// A little xorshift generator: the store's values and the masks.
struct Xs(u64);

impl Xs {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

struct Store {
    bytes: Vec<u8>,
    at: Vec<usize>,
    frames: Vec<usize>,
}

fn store(clips: usize) -> Store {
    let mut x = Xs(0x9e37_79b9_7f4a_7c15);
    let mut frames: Vec<usize> = (0..clips).map(|_| 50 + x.below(551)).collect();
    frames.sort_unstable();
    let (mut at, mut bytes) = (Vec::new(), Vec::new());
    for &f in &frames {
        at.push(bytes.len());
        for _ in 0..f.div_ceil(B) * M * B {
            let v = half::f16::from_f32(x.below(2000) as f32 * 0.05 - 80.0);
            bytes.extend(v.to_bits().to_le_bytes());
        }
    }
    Store { bytes, at, frames }
}

/// Buckets: consecutive clips (sorted by length) up to 8000 frames padded.
fn batches(s: &Store) -> Vec<(Vec<usize>, usize)> {
    let (mut out, mut cur) = (Vec::new(), Vec::new());
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

/// Each clip's masks: two frequency spans (rows), two time spans (frames), and the rows
/// as bits ([`Zeros::rows`]).
type Masks = ([(usize, usize); 2], [(usize, usize); 2], Vec<u64>);

fn masks(s: &Store) -> Vec<Masks> {
    let mut x = Xs(0x2545_f491_4f6c_dd1d);
    let mut span = |widest: usize, size: usize| {
        let w = x.below(widest + 1).min(size);
        (x.below(size - w + 1), w)
    };
    (s.frames.iter())
        .map(|&f| {
            let kind = std::env::var("KIND").unwrap_or_default();
            let mut rows = [span(8, M), span(8, M)];
            let mut frames = [span(20, f), span(20, f)];
            if kind == "frames" {
                rows = [(0, 0); 2];
            }
            if kind == "rows" {
                frames = [(0, 0); 2];
            }
            let mut bits = Vec::new();
            set_rows(&mut bits, &rows);
            (rows, frames, bits)
        })
        .collect()
}

/// Clip `c` into its item `dst` (rows of `width`), masked by `zeros` in the widening,
/// padding zero.
fn widen(s: &Store, c: usize, dst: &mut [f32], width: usize, zeros: Zeros<'_>) {
    let real = s.frames[c];
    let mut f = 0;
    while f < real {
        let len = B.min(real - f);
        let blk = &s.bytes[s.at[c] + (f / B) * M * B * 2..][..M * B * 2];
        let runs = Runs {
            rows: M,
            len,
            src_stride: B,
            dst_stride: width,
        };
        let z = Zeros { first: f, ..zeros };
        runs_masked_into(false, blk, &mut dst[f..], runs, &[] as &[RowMap], z);
        f += len;
    }
    for r in 0..M {
        dst[r * width + real..(r + 1) * width].fill(0.0);
    }
}

/// Masks applied to a widened item in a pass after (rows, then frame spans per row).
fn mask_after(dst: &mut [f32], width: usize, real: usize, (rows, frames, _): &Masks) {
    for (b, row) in dst.chunks_exact_mut(width).enumerate() {
        if rows.iter().any(|&(s, l)| b >= s && b < s + l) {
            row[..real].fill(0.0);
            continue;
        }
        for &(s, l) in frames {
            row[s..s + l].fill(0.0);
        }
    }
}

fn batch(s: &Store, (ids, width): (&[usize], usize), out: &mut [f32], ms: &[Masks], how: u8) {
    let per = M * width;
    for (j, &c) in ids.iter().enumerate() {
        let dst = &mut out[j * per..(j + 1) * per];
        let (_, frames, rows) = &ms[c];
        match how {
            0 => widen(s, c, dst, width, Zeros::default()),
            1 => {
                widen(s, c, dst, width, Zeros::default());
                mask_after(dst, width, s.frames[c], &ms[c]);
            }
            _ => {
                let z = Zeros {
                    rows,
                    frames,
                    first: 0,
                };
                widen(s, c, dst, width, z);
            }
        }
    }
}

fn main() {
    let rounds: usize = std::env::args().nth(1).map_or(7, |a| a.parse().unwrap());
    let s = store(4800);
    let ms = masks(&s);
    let bs = batches(&s);
    let most = bs.iter().map(|(ids, w)| ids.len() * w * M).max().unwrap();
    let real: usize = s.frames.iter().sum::<usize>() * M;
    let (mut out, mut check) = (vec![0f32; most], vec![0f32; most]);
    println!(
        "{} clips, {} batches, {:.0} MB stored",
        s.frames.len(),
        bs.len(),
        s.bytes.len() as f64 / 1e6
    );
    for (ids, w) in &bs {
        let n = ids.len() * w * M;
        batch(&s, (ids, *w), &mut out, &ms, 1);
        batch(&s, (ids, *w), &mut check, &ms, 2);
        let same = (out[..n].iter().zip(&check[..n])).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "masked in the widening differs");
    }
    let names = ["widen only", "masked after", "masked in registers"];
    let mut best = [f64::MAX; 3];
    for _ in 0..rounds {
        for (how, best) in best.iter_mut().enumerate() {
            if std::env::var("ONLY").is_ok_and(|o| o != how.to_string()) {
                continue;
            }
            let t = Instant::now();
            for (ids, w) in &bs {
                batch(&s, (ids, *w), &mut out, &ms, how as u8);
                black_box(&out);
            }
            *best = best.min(t.elapsed().as_secs_f64() * 1e9 / real as f64);
        }
    }
    for (name, b) in names.iter().zip(best) {
        println!(
            "{name}: {b:.3} ns a value ({:+.1}%)",
            100.0 * (b / best[0] - 1.0)
        );
    }
}
