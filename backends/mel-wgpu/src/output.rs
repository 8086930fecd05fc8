//! What the shader writes: f32 bits, or f16 / bf16 bit patterns two to a word.

use mel_core::{Dtype, MelPlan};

/// What the shader writes: f32 bits, or two 16-bit values per word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceOut {
    /// f32, converted on the host when the plan wants f16/bf16 and a segment holds an
    /// odd number of values (16-bit pairs would straddle segments).
    F32,
    /// f16 bit patterns, two per word.
    F16,
    /// bf16 bit patterns, two per word.
    Bf16,
}

impl DeviceOut {
    /// The output the shader produces for `plan`.
    pub fn for_plan(plan: &MelPlan) -> DeviceOut {
        let even = plan.values_per_segment().is_multiple_of(2);
        match plan.dtype() {
            Dtype::F16 if even => DeviceOut::F16,
            Dtype::Bf16 if even => DeviceOut::Bf16,
            _ => DeviceOut::F32,
        }
    }

    /// Bytes per value on the device.
    pub fn bytes(self) -> usize {
        if self == DeviceOut::F32 { 4 } else { 2 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::Config;

    #[test]
    fn odd_segments_are_written_as_f32_and_converted_on_the_host() {
        let mut c = Config::default();
        c.mel.n_mels = 31; // 31 × 5 values per segment: odd
        let plan = MelPlan::from_config(&c).unwrap();
        assert_eq!(DeviceOut::for_plan(&plan), DeviceOut::F32);
        c.mel.n_mels = 32;
        c.output.dtype = Dtype::Bf16;
        assert_eq!(
            DeviceOut::for_plan(&MelPlan::from_config(&c).unwrap()),
            DeviceOut::Bf16
        );
    }
}
