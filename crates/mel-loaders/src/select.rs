//! `--loader auto`: pick a loader from whether a valid cache already exists, and say
//! why; free memory, for the checks that size buffers.

use mel_core::config::LoaderKind;

/// The loader picked, and the reason in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoaderChoice {
    /// The loader to use (never `Auto`).
    pub kind: LoaderKind,
    /// Why, for the user.
    pub reason: String,
}

/// Memory the OS could give us now (`MemAvailable`), on Linux.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resolves `kind`. `cache_exists`: a cache file for this split is present (it is
/// validated when opened).
///
/// `auto` maps a cache when there is one, and otherwise streams: reading and decoding
/// then overlap the transform, and a bounded set of buffers is reused, where preloading
/// first fills a fresh arena as large as the split (faulting in every page of it before
/// the first batch). Streaming was the faster of the two on every machine measured
/// (BENCHMARKS.md: the 2-core dev machine and the 16-core H100 host).
pub fn choose(kind: LoaderKind, cache_exists: bool) -> LoaderChoice {
    match kind {
        LoaderKind::Auto if cache_exists => LoaderChoice {
            kind: LoaderKind::Memmap,
            reason: "a decoded-audio cache exists for this split".into(),
        },
        LoaderKind::Auto => LoaderChoice {
            kind: LoaderKind::Stream,
            reason: "no decoded-audio cache: reading overlaps the transform, in bounded memory"
                .into(),
        },
        k => LoaderChoice {
            kind: k,
            reason: "asked for".into(),
        },
    }
}

/// Refuses a preload whose arena (`decoded_bytes`, the whole split decoded) would take
/// more than half of `available` memory, with the figures and the alternatives; allows it
/// where available memory is unknown.
pub fn check_preload(decoded_bytes: u64, available: Option<u64>) -> Result<(), String> {
    match available {
        Some(avail) if decoded_bytes > avail / 2 => Err(format!(
            "the preload loader would decode the whole split into {:.2} GB of RAM, over half the available memory ({:.2} GB); use the stream loader (bounded memory) or memmap (run.loader)",
            decoded_bytes as f64 / 1e9,
            avail as f64 / 1e9
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preload_over_half_the_available_memory_is_refused_with_the_figures() {
        assert!(check_preload(500, Some(1000)).is_ok());
        assert!(check_preload(1 << 40, None).is_ok());
        let e = check_preload(501, Some(1000)).unwrap_err();
        assert!(e.contains("the stream loader") && e.contains("GB"), "{e}");
    }

    #[test]
    fn auto_maps_a_cache_and_otherwise_streams() {
        let c = choose(LoaderKind::Auto, true);
        assert_eq!(c.kind, LoaderKind::Memmap);
        let c = choose(LoaderKind::Auto, false);
        assert_eq!(c.kind, LoaderKind::Stream);
        assert!(c.reason.contains("bounded memory"));
        let c = choose(LoaderKind::Preload, true);
        assert_eq!(
            (c.kind, c.reason.as_str()),
            (LoaderKind::Preload, "asked for")
        );
        assert!(available_memory().is_some());
    }
}
