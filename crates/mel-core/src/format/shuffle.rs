//! HDF5's shuffle filter and its inverse: byte `j` of every element stored together, for
//! `j = 0, 1, ...` (it makes the high bytes of f16 spectrograms compress well). The HDF5
//! sink shuffles before deflating, melread unshuffles after inflating.

/// `raw` shuffled: byte `j` of every `elem`-byte element, for each `j` in turn; bytes past
/// the last whole element stay in place, as HDF5 leaves them.
pub fn shuffle(raw: &[u8], elem: usize) -> Vec<u8> {
    let n = raw.len() / elem.max(1);
    if elem <= 1 || n == 0 {
        return raw.to_vec();
    }
    let mut out = vec![0u8; raw.len()];
    let (planes, tail) = out.split_at_mut(n * elem);
    for (j, plane) in planes.chunks_exact_mut(n).enumerate() {
        for (o, e) in plane.iter_mut().zip(raw.chunks_exact(elem)) {
            *o = e[j];
        }
    }
    tail.copy_from_slice(&raw[n * elem..]);
    out
}

/// Writes `src` (shuffled by [`shuffle`]) unshuffled into `dst`, which has its length.
///
/// # Panics
/// If `dst` and `src` differ in length (a caller's bug, never a file's).
pub fn unshuffle(src: &[u8], dst: &mut [u8], elem: usize) {
    assert_eq!(src.len(), dst.len(), "unshuffle needs equal lengths");
    let n = src.len() / elem.max(1);
    if elem <= 1 || n == 0 {
        dst.copy_from_slice(src);
        return;
    }
    for (b, plane) in src.chunks_exact(n).enumerate().take(elem) {
        for (i, &v) in plane.iter().enumerate() {
            dst[i * elem + b] = v;
        }
    }
    // HDF5 leaves bytes past the last whole element in place.
    let tail = n * elem;
    dst[tail..].copy_from_slice(&src[tail..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_groups_bytes_by_position() {
        let raw = [1, 2, 3, 4, 5, 6];
        assert_eq!(shuffle(&raw, 2), [1, 3, 5, 2, 4, 6]);
        assert_eq!(shuffle(&raw, 4), [1, 2, 3, 4, 5, 6]);
        assert_eq!(
            shuffle(&[1, 2, 3, 4, 5, 6, 7, 8], 4),
            [1, 5, 2, 6, 3, 7, 4, 8]
        );
        assert_eq!(shuffle(&raw, 1), raw);
        assert_eq!(shuffle(&[9], 2), [9]);
    }

    #[test]
    fn unshuffle_inverts_shuffle_for_every_width_and_tail() {
        for elem in [1, 2, 3, 4, 8] {
            for len in [0, 1, 2, 5, 16, 37] {
                let raw: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37)).collect();
                let mut back = vec![0; len];
                unshuffle(&shuffle(&raw, elem), &mut back, elem);
                assert_eq!(back, raw, "elem {elem}, len {len}");
            }
        }
    }
}
