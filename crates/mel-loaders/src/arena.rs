//! Rows of decoded clips in one buffer: the loaders' shared bookkeeping.

/// Moves the rows whose `ok` flag is set to the front of `arena` (rows of `clip_samples`
/// samples, in order) and returns how many were kept; the caller truncates.
pub fn compact(arena: &mut [f32], clip_samples: usize, ok: &[bool]) -> usize {
    let mut kept = 0;
    for (i, _) in ok.iter().enumerate().filter(|(_, ok)| **ok) {
        if kept != i {
            arena.copy_within(
                i * clip_samples..(i + 1) * clip_samples,
                kept * clip_samples,
            );
        }
        kept += 1;
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_rows_move_to_the_front_in_order() {
        let mut a = vec![0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0];
        assert_eq!(compact(&mut a, 2, &[false, true, false, true]), 2);
        assert_eq!(&a[..4], &[1.0, 1.0, 3.0, 3.0]);
        assert_eq!(compact(&mut a, 2, &[true, true, true, true]), 4);
        assert_eq!(compact(&mut a, 2, &[false; 4]), 0);
    }
}
