//! Times 512-point real FFTs in f32 and f64 (a diagnostic).
use realfft::RealFftPlanner;
use std::time::Instant;
fn bench<T: realfft::FftNum + From<f32>>(label: &str) {
    let f = RealFftPlanner::<T>::new().plan_fft_forward(512);
    let mut i = f.make_input_vec();
    let mut o = f.make_output_vec();
    let mut s = f.make_scratch_vec();
    for (k, x) in i.iter_mut().enumerate() {
        *x = T::from((k as f32 * 0.1).sin());
    }
    let n = 2_000_000;
    let t = Instant::now();
    for _ in 0..n {
        f.process_with_scratch(&mut i, &mut o, &mut s).unwrap();
        std::hint::black_box(&o);
    }
    println!(
        "{label}: {:.0} ns per 512-point real FFT",
        t.elapsed().as_nanos() as f64 / n as f64
    );
}
fn main() {
    bench::<f32>("f32");
    bench::<f64>("f64");
}
