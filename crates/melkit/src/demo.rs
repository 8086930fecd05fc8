//! The demo's five sounds (`melctl demo`'s clips and the test datasets of melread):
//! deterministic leak-like signals whose classes sound different.

use std::f64::consts::PI;

/// The demo's classes (the leak-4k workload's).
pub const CLASSES: [&str; 5] = ["leak", "no_leak", "normal", "quiet", "random"];

/// SplitMix64: a tiny deterministic generator, so the demo is identical everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// One clip of `class` (index into [`CLASSES`]), `n` samples at `rate` Hz, in [-1, 1].
pub fn synth(class: usize, n: usize, rate: f64, seed: u64) -> Vec<f64> {
    let mut rng = Rng(seed);
    let mut lp = 0.0; // one-pole low-pass state
    let (mut y1, mut y2) = (0.0, 0.0); // resonator state
    let f0 = 300.0 + 400.0 * (rng.uniform() + 1.0) / 2.0;
    let hum = 50.0 + 10.0 * rng.uniform();
    let r: f64 = 0.98;
    let theta = 2.0 * PI * f0 / rate;
    (0..n)
        .map(|i| {
            let t = i as f64 / rate;
            let white = rng.uniform();
            match class {
                // leak: a hiss resonating around f0 (a narrow band of noise)
                0 => {
                    let y = white + 2.0 * r * theta.cos() * y1 - r * r * y2;
                    (y2, y1) = (y1, y);
                    0.02 * y
                }
                // no_leak: mains hum and harmonics over faint noise
                1 => {
                    0.3 * (2.0 * PI * hum * t).sin()
                        + 0.1 * (6.0 * PI * hum * t).sin()
                        + 0.01 * white
                }
                // normal: low-passed flow noise
                2 => {
                    lp += 0.05 * (white - lp);
                    0.8 * lp
                }
                // quiet: a very low noise floor
                3 => 0.003 * white,
                // random: sparse clicks over low noise
                _ => {
                    let click = if rng.next().is_multiple_of(2000) {
                        0.9 * rng.uniform()
                    } else {
                        0.0
                    };
                    click + 0.005 * white
                }
            }
            .clamp(-1.0, 1.0)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_differ_and_generation_is_deterministic() {
        let energy = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64;
        let clips: Vec<Vec<f64>> = (0..5).map(|c| synth(c, 4096, 4096.0, 7)).collect();
        assert_eq!(clips[0], synth(0, 4096, 4096.0, 7));
        let e: Vec<f64> = clips.iter().map(|c| energy(c)).collect();
        // quiet is far quieter than the hum
        assert!(e[3] * 100.0 < e[1], "{e:?}");
        assert!(clips.iter().all(|c| c.iter().all(|x| x.abs() <= 1.0)));
    }
}
