//! `--loader auto`: pick a loader from the dataset's decoded size, free memory and
//! whether a valid cache already exists, and say why.

use mel_core::config::LoaderKind;

/// The loader picked, and the reason in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
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

/// Resolves `kind` for a split whose decoded audio takes `decoded_bytes`.
/// `cache_exists`: a cache file for this split is present (it is validated when opened).
pub fn choose(
    kind: LoaderKind,
    decoded_bytes: u64,
    available: Option<u64>,
    cache_exists: bool,
) -> Choice {
    let gb = |b: u64| b as f64 / 1e9;
    match kind {
        LoaderKind::Auto => {}
        k => {
            return Choice {
                kind: k,
                reason: "asked for".into(),
            };
        }
    }
    if cache_exists {
        return Choice {
            kind: LoaderKind::Memmap,
            reason: "a decoded-audio cache exists for this split".into(),
        };
    }
    match available {
        Some(avail) if decoded_bytes <= avail / 4 => Choice {
            kind: LoaderKind::Preload,
            reason: format!(
                "the decoded split ({:.2} GB) fits in a quarter of free memory ({:.2} GB)",
                gb(decoded_bytes),
                gb(avail)
            ),
        },
        Some(avail) => Choice {
            kind: LoaderKind::Stream,
            reason: format!(
                "the decoded split ({:.2} GB) is over a quarter of free memory ({:.2} GB): streaming keeps memory bounded",
                gb(decoded_bytes),
                gb(avail)
            ),
        },
        None => Choice {
            kind: LoaderKind::Stream,
            reason: "free memory unknown: streaming keeps memory bounded".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_prefers_cache_then_ram_then_streaming() {
        let c = choose(LoaderKind::Auto, 10, Some(1000), true);
        assert_eq!(c.kind, LoaderKind::Memmap);
        let c = choose(LoaderKind::Auto, 250, Some(1000), false);
        assert_eq!(c.kind, LoaderKind::Preload);
        assert!(c.reason.contains("quarter"));
        let c = choose(LoaderKind::Auto, 251, Some(1000), false);
        assert_eq!(c.kind, LoaderKind::Stream);
        assert_eq!(
            choose(LoaderKind::Auto, 1, None, false).kind,
            LoaderKind::Stream
        );
        let c = choose(LoaderKind::Preload, 1 << 40, Some(1), false);
        assert_eq!(
            (c.kind, c.reason.as_str()),
            (LoaderKind::Preload, "asked for")
        );
        assert!(available_memory().is_some());
    }
}
