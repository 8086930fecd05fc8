//! Any bytes as a memmap-cache or journal-batch header (melctl's checksummed container):
//! refused or decoded with sections that lie inside the file, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mel_core::container;

fuzz_target!(|data: &[u8]| {
    for (magic, start) in [(b"MELCACHE", 4096u64), (b"MELJRNL3", container::header_len(3) as u64)] {
        for version in [3, 4] {
            if let Ok(h) = container::decode(data, data.len() as u64, magic, "fuzz", version, start) {
                for s in &h.sections {
                    let r = s.range();
                    assert!(r.end <= data.len(), "a section beyond the file");
                    let _ = container::verify(&data[r], s, "section");
                }
            }
        }
    }
});
