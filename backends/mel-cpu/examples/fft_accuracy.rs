//! Measures the f32 FFT's error against f64 on the speech-16k golden input (a diagnostic):
//! `cargo run --release -p mel-cpu --features fft-diagnostics --example fft_accuracy`.
use realfft::{RealFftPlanner, num_complex::Complex};
use rustfft::FftPlanner;
fn main() {
    let g = &mel_tests_goldens();
    let n = 400usize;
    let w: Vec<f64> = (0..n)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n as f64).cos())
        .collect();
    let r32 = RealFftPlanner::<f32>::new().plan_fft_forward(n);
    let r64 = RealFftPlanner::<f64>::new().plan_fft_forward(n);
    let c32 = FftPlanner::<f32>::new().plan_fft_forward(n);
    let (mut worst_r, mut worst_c) = (0f64, 0f64);
    for start in (0..g.len() - n).step_by(160) {
        let fr64: Vec<f64> = (0..n).map(|i| g[start + i] * w[i]).collect();
        let fr32: Vec<f32> = (0..n)
            .map(|i| (g[start + i] as f32) * (w[i] as f32))
            .collect();
        let mut a = fr64.clone();
        let mut s64 = r64.make_output_vec();
        r64.process(&mut a, &mut s64).unwrap();
        let mut b = fr32.clone();
        let mut s32 = r32.make_output_vec();
        r32.process(&mut b, &mut s32).unwrap();
        let mut c: Vec<Complex<f32>> = fr32.iter().map(|&x| Complex::new(x, 0.0)).collect();
        c32.process(&mut c);
        let peak = s64.iter().map(|z| z.norm_sqr()).fold(0.0, f64::max);
        for k in 0..=n / 2 {
            let p = s64[k].norm_sqr();
            if p < peak * 1e-10 || p == 0.0 {
                continue;
            }
            let er = (10.0 * ((s32[k].norm_sqr() as f64) / p).log10()).abs();
            let ec = (10.0 * ((c[k].norm_sqr() as f64) / p).log10()).abs();
            worst_r = worst_r.max(er);
            worst_c = worst_c.max(ec);
        }
    }
    println!(
        "per-bin worst dB error within 100 dB of frame peak: realfft {worst_r:.4}, rustfft complex {worst_c:.4}"
    );
}
fn mel_tests_goldens() -> Vec<f64> {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/golden/speech-16k.input.npy"
    ))
    .unwrap();
    let data = &bytes[128..];
    data.chunks(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]) as f64 / 32768.0)
        .collect()
}
