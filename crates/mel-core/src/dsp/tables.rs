//! Flat tables a GPU kernel reads, derived from a plan once: which output segments each
//! distinct segment fills (CSR), and each mel filter's non-zero span with its weights.
//! The CUDA and wgpu backends both upload these.

use crate::plan::MelPlan;

/// For each distinct segment `d`, the output segment positions it fills:
/// `out[start[d]..start[d + 1]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentCsr {
    /// `distinct + 1` row starts into `out`.
    pub start: Vec<u32>,
    /// Output segment indices (`[long][short]` order), grouped by distinct segment.
    pub out: Vec<u32>,
}

impl SegmentCsr {
    /// The map of `plan`.
    pub fn new(plan: &MelPlan) -> Self {
        let mut start = vec![0u32];
        let mut out = Vec::with_capacity(plan.segment_map().len());
        for d in 0..plan.distinct_offsets().len() {
            out.extend(
                plan.segment_map()
                    .iter()
                    .enumerate()
                    .filter(|&(_, &m)| m as usize == d)
                    .map(|(i, _)| i as u32),
            );
            start.push(out.len() as u32);
        }
        SegmentCsr { start, out }
    }
}

/// The mel filters' non-zero spans, flattened: filter `m` covers bins
/// `first[m] .. first[m] + len[m]` with weights `weights[offset[m] ..][.. len[m]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterSpans {
    /// First bin of each filter.
    pub first: Vec<u32>,
    /// Bins in each filter.
    pub len: Vec<u32>,
    /// Offset of each filter's weights in `weights`.
    pub offset: Vec<u32>,
    /// The non-zero weights in f32 (mel sums run in f32, like the CPU backend's output).
    pub weights: Vec<f32>,
}

impl FilterSpans {
    /// The spans of `plan`'s filterbank, weights taken from the dense f64 matrix.
    pub fn new(plan: &MelPlan) -> Self {
        let mut s = FilterSpans {
            first: vec![],
            len: vec![],
            offset: vec![],
            weights: vec![],
        };
        for (m, f) in plan.sparse_filterbank().filters.iter().enumerate() {
            s.first.push(f.start as u32);
            s.len.push(f.weights.len() as u32);
            s.offset.push(s.weights.len() as u32);
            s.weights.extend(
                (f.start..f.start + f.weights.len())
                    .map(|b| plan.filterbank()[b * plan.n_mels() + m] as f32),
            );
        }
        s
    }
}

/// `exp(-2πik/n)` for k in `0..n` as interleaved (re, im), computed in f64.
pub fn dft_twiddles(n: usize) -> Vec<f64> {
    (0..n)
        .flat_map(|k| {
            let a = -2.0 * std::f64::consts::PI * k as f64 / n as f64;
            [a.cos(), a.sin()]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    #[test]
    fn leak_4k_segment_map_covers_every_output_segment_once() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let csr = SegmentCsr::new(&plan);
        assert_eq!(csr.start.len(), 160);
        assert_eq!(*csr.start.last().unwrap(), 237);
        let mut seen = csr.out.clone();
        seen.sort();
        assert_eq!(seen, (0..237).collect::<Vec<_>>());
        // Short window 2 of long window k is short window 0 of long window k + 1.
        assert_eq!(
            &csr.out[csr.start[2] as usize..csr.start[3] as usize],
            &[2, 3]
        );
    }

    #[test]
    fn filter_spans_match_the_dense_filterbank() {
        let plan = MelPlan::from_config(&Config::default()).unwrap();
        let s = FilterSpans::new(&plan);
        assert_eq!(s.first.len(), plan.n_mels());
        assert_eq!(s.weights.len(), s.len.iter().sum::<u32>() as usize);
        for m in 0..plan.n_mels() {
            for bin in 0..plan.n_freqs() {
                let dense = plan.filterbank()[bin * plan.n_mels() + m] as f32;
                let (a, l) = (s.first[m] as usize, s.len[m] as usize);
                let sparse = if (a..a + l).contains(&bin) {
                    s.weights[s.offset[m] as usize + bin - a]
                } else {
                    0.0
                };
                assert_eq!(sparse, dense, "filter {m} bin {bin}");
            }
        }
    }

    #[test]
    fn twiddles_are_unit_roots() {
        let t = dft_twiddles(8);
        assert_eq!(t.len(), 16);
        assert!((t[4] - 0.0).abs() < 1e-15 && (t[5] + 1.0).abs() < 1e-15); // k = 2: -i
    }
}
