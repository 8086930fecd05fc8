//! Any text as a TOML configuration, through validation and planning: a plan or an error
//! naming the field, never a panic, an abort or a plan whose tables are unbounded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mel_core::{Config, MelPlan};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = Config::from_toml(text) else {
        return;
    };
    if let Ok(plan) = MelPlan::from_config(&config) {
        let _ = mel_core::pipeline::check_memory(&config, &plan, 8 << 30);
        assert!(plan.values_per_clip() <= mel_core::plan::MAX_VALUES_PER_CLIP);
        assert!(plan.filterbank().len() <= mel_core::plan::MAX_FILTERBANK);
    }
});
