//! Per-mel-bin statistics of a split's spectrograms, computed as the sink receives them
//! (no second pass over the output): the mean and standard deviation of every value of
//! each mel bin, accumulated in f64 with Chan's parallel update (a batch's exact mean and
//! sum of squared deviations merged into the running ones), numerically stable.

use mel_core::OutputBuf;

/// Running statistics of each mel bin.
#[derive(Debug, Clone)]
pub struct MelStats {
    n_mels: usize,
    n_frames: usize,
    count: u64,
    mean: Vec<f64>,
    m2: Vec<f64>,
}

impl MelStats {
    /// Statistics of spectrograms `[.., n_mels, n_frames]`.
    pub fn new(n_mels: usize, n_frames: usize) -> Self {
        MelStats {
            n_mels,
            n_frames,
            count: 0,
            mean: vec![0.0; n_mels],
            m2: vec![0.0; n_mels],
        }
    }

    /// Adds every value of `data` (whole spectrograms, frames last).
    pub fn add(&mut self, data: &OutputBuf) {
        let (m, f) = (self.n_mels, self.n_frames);
        let spectrograms = data.len() / (m * f).max(1);
        if spectrograms == 0 {
            return;
        }
        let n = (spectrograms * f) as u64;
        let bin = |s: usize, mel: usize| (s * m + mel) * f;
        let mut batch_mean = vec![0.0f64; m];
        for s in 0..spectrograms {
            for (mel, acc) in batch_mean.iter_mut().enumerate() {
                let at = bin(s, mel);
                *acc += (at..at + f).map(|i| data.get_f64(i)).sum::<f64>();
            }
        }
        batch_mean.iter_mut().for_each(|x| *x /= n as f64);
        let mut batch_m2 = vec![0.0f64; m];
        for s in 0..spectrograms {
            for (mel, acc) in batch_m2.iter_mut().enumerate() {
                let at = bin(s, mel);
                let mu = batch_mean[mel];
                *acc += (at..at + f)
                    .map(|i| (data.get_f64(i) - mu).powi(2))
                    .sum::<f64>();
            }
        }
        let total = self.count + n;
        for mel in 0..m {
            let delta = batch_mean[mel] - self.mean[mel];
            self.mean[mel] += delta * n as f64 / total as f64;
            self.m2[mel] +=
                batch_m2[mel] + delta * delta * (self.count as f64 * n as f64) / total as f64;
        }
        self.count = total;
    }

    /// Values seen per mel bin.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The mean of each mel bin.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// The (population) standard deviation of each mel bin, as numpy's `std`.
    pub fn std(&self) -> Vec<f64> {
        self.m2
            .iter()
            .map(|m2| (m2 / self.count.max(1) as f64).sqrt())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_merge_to_the_two_pass_statistics() {
        // 7 spectrograms of 3 mels × 4 frames, values far from zero (as dB values are).
        let values: Vec<f32> = (0..7 * 12)
            .map(|i| -60.0 + ((i * 37) % 23) as f32 * 0.75 + (i / 12) as f32)
            .collect();
        let mut s = MelStats::new(3, 4);
        for chunk in values.chunks(24) {
            s.add(&OutputBuf::F32(chunk.to_vec()));
        }
        assert_eq!(s.count(), 7 * 4);
        for mel in 0..3 {
            let v: Vec<f64> = values
                .chunks(12)
                .flat_map(|sp| sp[mel * 4..mel * 4 + 4].iter().map(|&x| x as f64))
                .collect();
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
            assert!((s.mean()[mel] - mean).abs() < 1e-12, "{mel}");
            assert!((s.std()[mel] - var.sqrt()).abs() < 1e-12, "{mel}");
        }
    }
}
