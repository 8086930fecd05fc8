//! The resampling contract, swept over a grid of rates with tones against the exact tone:
//! for every source rate to every target rate and every `resample_quality`, the pass band
//! is flat within ±0.1 dB up to 0.9 × the lower Nyquist, whatever is not the tone
//! (aliases, images, block artefacts) is at least 80 dB down, a tone above the new
//! Nyquist comes out at least 80 dB down, the output is aligned with the input (no delay)
//! and has `ceil(len × to / from)` samples.
//!
//! `cargo test -p mel-audio --test resample_grid -- --nocapture` prints the table that
//! BENCHMARKS.md quotes.

use mel_audio::resample::resample;
use mel_core::spec::ResampleQuality;
use std::f64::consts::PI;

/// Source rates: the common recording rates, an odd one (8012 Hz, whose ratio to the
/// targets reduces badly) and the ends of the supported range (4 and 384 kHz).
const FROM: [u32; 17] = [
    4_000, 8_000, 8_012, 11_025, 12_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000, 88_200,
    96_000, 176_400, 192_000, 352_800, 384_000,
];
/// Target rates: the presets' (4096 leak-4k, 16 kHz speech, 22 050 music) and 8 kHz.
const TO: [u32; 4] = [4_096, 8_000, 16_000, 22_050];
const QUALITIES: [ResampleQuality; 3] = [
    ResampleQuality::Fast,
    ResampleQuality::Balanced,
    ResampleQuality::Best,
];

/// Pass-band tones, as fractions of the lower Nyquist.
const PASS: [f64; 6] = [0.02, 0.17, 0.41, 0.63, 0.81, 0.9];
/// Transition-band tones: their own level is free, but nothing else may appear.
const TRANSITION: [f64; 2] = [0.95, 0.99];
/// The contract.
const PASS_DB: f64 = 0.1;
const STOP_DB: f64 = 80.0;
/// Alignment: the fitted tone's delay, in output samples.
const DELAY_SAMPLES: f64 = 0.01;

/// Output samples per tone; a quarter at each end is left out of the measures, so that
/// the filter only ever sees the tone.
const OUT_LEN: usize = 8_192;
const AMP: f64 = 0.5;
const PHASE: f64 = 0.3;

fn tone(freq: f64, rate: u32, n: usize) -> Vec<f32> {
    let w = 2.0 * PI * freq / rate as f64;
    (0..n)
        .map(|i| (AMP * (w * i as f64 + PHASE).sin()) as f32)
        .collect()
}

/// The middle half of the output, where the filter saw only the tone.
fn middle(y: &[f32]) -> std::ops::Range<usize> {
    y.len() / 4..y.len() - y.len() / 4
}

/// `y` (at `rate`) against the exact tone of `freq`: (gain in dB, everything that is not
/// the tone in dB relative to the input tone, delay in output samples).
fn against_tone(y: &[f32], freq: f64, rate: f64) -> (f64, f64, f64) {
    let w = 2.0 * PI * freq / rate;
    let (mut ss, mut sc, mut cc, mut ys, mut yc) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for i in middle(y) {
        let (s, c) = (w * i as f64 + PHASE).sin_cos();
        let v = y[i] as f64;
        ss += s * s;
        sc += s * c;
        cc += c * c;
        ys += v * s;
        yc += v * c;
    }
    let det = ss * cc - sc * sc;
    let (a, b) = ((ys * cc - yc * sc) / det, (yc * ss - ys * sc) / det);
    let mut err = 0.0;
    for i in middle(y) {
        let (s, c) = (w * i as f64 + PHASE).sin_cos();
        err += (y[i] as f64 - a * s - b * c).powi(2);
    }
    let rms = (err / middle(y).len() as f64).sqrt();
    let gain = (a * a + b * b).sqrt() / AMP;
    // y ≈ gain·AMP·sin(w·i + PHASE + φ): a delay of d samples is φ = -w·d.
    let delay = -b.atan2(a) / w;
    (
        20.0 * gain.log10(),
        20.0 * (rms * 2f64.sqrt() / AMP).max(1e-20).log10(),
        delay,
    )
}

/// Level of the middle of `y` relative to the input tone, in dB.
fn level(y: &[f32]) -> f64 {
    let r = middle(y);
    let n = r.len() as f64;
    let rms = (y[r].iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / n).sqrt();
    20.0 * (rms * 2f64.sqrt() / AMP).max(1e-20).log10()
}

/// Stop-band tones for a downsampling: just above the new Nyquist, across the band, and
/// just below the source's Nyquist (their aliases land all over the output band).
fn stop_tones(from: u32, to: u32) -> Vec<f64> {
    let (lo, hi) = (to as f64 / 2.0, from as f64 / 2.0);
    if hi <= lo {
        return Vec::new();
    }
    let mut f: Vec<f64> = [1.001, 1.01, 1.05, 1.2, 1.5, 2.5, 5.0, 20.0, 60.0]
        .iter()
        .map(|k| k * lo)
        .filter(|f| *f < 0.999 * hi)
        .collect();
    f.push((lo + hi) / 2.0);
    f.push(hi - 0.01 * (hi - lo));
    f
}

#[derive(Debug, Default, Clone, Copy)]
struct Worst {
    gain_db: f64,
    spurious_db: f64,
    stop_db: f64,
    delay: f64,
}

fn measure(from: u32, to: u32, q: ResampleQuality) -> (Worst, Vec<String>) {
    let mut problems = Vec::new();
    let n_in = (OUT_LEN as u64 * from as u64).div_ceil(to as u64) as usize;
    let lower_nyquist = from.min(to) as f64 / 2.0;
    let mut w = Worst {
        spurious_db: -300.0,
        stop_db: -300.0,
        ..Worst::default()
    };
    let run = |freq: f64, problems: &mut Vec<String>| -> Vec<f32> {
        let x = tone(freq, from, n_in);
        let y = resample(&x, from, to, q).unwrap();
        let want = (x.len() as u64 * to as u64).div_ceil(from as u64) as usize;
        if y.len() != want {
            problems.push(format!("{} samples out, not {want}", y.len()));
        }
        y
    };
    for frac in PASS.iter().chain(&TRANSITION) {
        let freq = frac * lower_nyquist;
        let y = run(freq, &mut problems);
        let (gain, spurious, delay) = against_tone(&y, freq, to as f64);
        if PASS.contains(frac) {
            if gain.abs() > w.gain_db.abs() {
                w.gain_db = gain;
            }
            if gain.abs() > PASS_DB {
                problems.push(format!("a {freq:.1} Hz tone comes out at {gain:+.3} dB"));
            }
            // The delay is measured where the phase says most about it.
            if *frac >= 0.17 {
                if delay.abs() > w.delay.abs() {
                    w.delay = delay;
                }
                if delay.abs() > DELAY_SAMPLES {
                    problems.push(format!(
                        "a {freq:.1} Hz tone comes out {delay:+.4} samples late"
                    ));
                }
            }
        }
        w.spurious_db = w.spurious_db.max(spurious);
        if spurious > -STOP_DB {
            problems.push(format!(
                "a {freq:.1} Hz tone comes with other content at {spurious:.1} dB"
            ));
        }
    }
    for freq in stop_tones(from, to) {
        let out = level(&run(freq, &mut problems));
        w.stop_db = w.stop_db.max(out);
        if out > -STOP_DB {
            problems.push(format!(
                "a {freq:.1} Hz tone (above the new Nyquist) comes out at {out:.1} dB"
            ));
        }
    }
    (w, problems)
}

#[test]
fn every_rate_to_every_target_meets_the_contract() {
    let mut jobs = Vec::new();
    for to in TO {
        for from in FROM {
            if from != to {
                for q in QUALITIES {
                    jobs.push((from, to, q));
                }
            }
        }
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(from, to, q)) = jobs.get(i) else {
                        break;
                    };
                    let r = measure(from, to, q);
                    results.lock().unwrap().push((i, r));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.0);
    println!(
        "{:>7} -> {:>6} {:>9}  {:>13}  {:>13}  {:>13}  {:>8}",
        "from", "to", "quality", "pass err dB", "spurious dB", "stop band dB", "delay"
    );
    let mut failures = Vec::new();
    for (i, (w, problems)) in &results {
        let (from, to, q) = jobs[*i];
        let stop = if w.stop_db > -300.0 {
            format!("{:.1}", w.stop_db)
        } else {
            "-".into()
        };
        println!(
            "{from:>7} -> {to:>6} {:>9}  {:>+13.4}  {:>13.1}  {stop:>13}  {:>+8.4}",
            format!("{q:?}"),
            w.gain_db,
            w.spurious_db,
            w.delay
        );
        failures.extend(
            problems
                .iter()
                .map(|p| format!("{from} Hz -> {to} Hz ({q:?}): {p}")),
        );
    }
    assert!(
        failures.is_empty(),
        "{} of the contract's checks failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A ratio too large for one FFT block (96 kHz to 10 Hz and back: 9600:1) is done in two
/// steps through an intermediate rate; the result meets the same contract.
#[test]
fn ratios_beyond_one_block_meet_the_contract_in_two_steps() {
    let mut failures = Vec::new();
    for (from, to, out_len) in [(96_000u32, 10u32, 1_024usize), (10, 96_000, 1_024 * 9_600)] {
        let n_in = (out_len as u64 * from as u64).div_ceil(to as u64) as usize;
        let nyquist = from.min(to) as f64 / 2.0;
        // A pass-band tone, then a stop-band one (down) or a transition-band one (up),
        // whose level is free but which may bring nothing else.
        let other = if from > to { 1.2 } else { 0.95 };
        for freq in [0.9 * nyquist, other * nyquist] {
            let x = tone(freq, from, n_in);
            for q in [ResampleQuality::Fast, ResampleQuality::Best] {
                let y = resample(&x, from, to, q).unwrap();
                assert_eq!(y.len(), out_len, "{from} -> {to} {q:?}");
                let (gain, spurious, delay) = against_tone(&y, freq, to as f64);
                let out = level(&y);
                println!(
                    "{from} -> {to} {q:?}, {freq} Hz: {gain:+.4} dB, other content \
                     {spurious:.1} dB, delay {delay:+.4}, level {out:.1} dB"
                );
                let bad = if freq < nyquist * 0.91 {
                    gain.abs() > PASS_DB || spurious > -STOP_DB || delay.abs() > DELAY_SAMPLES
                } else if freq < nyquist {
                    spurious > -STOP_DB
                } else {
                    out > -STOP_DB
                };
                if bad {
                    failures.push(format!(
                        "{from} -> {to} {q:?}, {freq} Hz: {gain:+.3} dB, other content \
                         {spurious:.1} dB, {delay:+.4} samples late, level {out:.1} dB"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
