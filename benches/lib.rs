//! Shared inputs for the criterion benchmarks.

/// `clips` deterministic leak-4k-like clips (noise plus a tone), 40,960 samples each.
pub fn leak_clips(clips: usize) -> Vec<f32> {
    let n = 40_960;
    let mut state = 0x1234_5678u32;
    (0..clips * n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let noise = (state as f32 / u32::MAX as f32) * 2.0 - 1.0;
            0.1 * noise + 0.3 * ((i % n) as f32 * 0.07).sin()
        })
        .collect()
}
