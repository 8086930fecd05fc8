//! The configuration's enums by name: one list of each enum's values, with a line on
//! each, that the TOML, the CLI's flags and help, Python's keywords and every error use.

/// An enum written by name in flags, TOML, keyword arguments and reports.
pub trait Named: Sized + Copy + Send + Sync + 'static {
    /// What it is, for errors (`backend`).
    const WHAT: &'static str;
    /// Every value, in documentation order.
    const ALL: &'static [Self];
    /// Its name.
    fn name(self) -> &'static str;
    /// One line on what it does, for help.
    fn about(self) -> &'static str;
    /// The value named `name`, or why not, listing the names.
    fn parse_name(name: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|v| v.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|v| v.name()).collect();
                format!(
                    "{name:?} is not a {} (one of: {})",
                    Self::WHAT,
                    names.join(", ")
                )
            })
    }
}

/// Implements [`Named`] and `FromStr` for `$t` from one table, (variant, name, about) in
/// order, with the same `ALL`, `name` and `about` inherent too (callers need no import).
macro_rules! named {
    ($t:ty, $what:literal, [$(($v:path, $name:literal, $about:literal)),+ $(,)?]) => {
        impl $t {
            /// Every value, in documentation order.
            pub const ALL: &'static [Self] = &[$($v),+];
            /// The name used in flags, TOML, keyword arguments and reports.
            pub fn name(self) -> &'static str {
                match self { $($v => $name),+ }
            }
            /// One line on what it does, for help.
            pub fn about(self) -> &'static str {
                match self { $($v => $about),+ }
            }
        }
        impl $crate::named::Named for $t {
            const WHAT: &'static str = $what;
            const ALL: &'static [Self] = <$t>::ALL;
            fn name(self) -> &'static str {
                <$t>::name(self)
            }
            fn about(self) -> &'static str {
                <$t>::about(self)
            }
        }
        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                <$t as $crate::named::Named>::parse_name(s)
            }
        }
    };
}
pub(crate) use named;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BackendKind, LoaderKind, Preset, SinkKind};
    use crate::spec::{Dtype, Precision};

    /// Each enum's names are those its TOML (serde) reads and writes, each once.
    fn round_trips<
        T: Named + serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    >() {
        let mut seen = std::collections::HashSet::new();
        for &v in T::ALL {
            assert!(seen.insert(v.name()), "{} twice", v.name());
            assert_eq!(serde_json::to_value(v).unwrap(), v.name());
            assert_eq!(serde_json::from_value::<T>(v.name().into()).unwrap(), v);
            assert_eq!(T::parse_name(v.name()).unwrap(), v);
            assert!(!v.about().is_empty());
        }
        let e = T::parse_name("nope").unwrap_err();
        assert!(e.contains(T::WHAT) && e.contains(T::ALL[0].name()), "{e}");
    }

    #[test]
    fn names_are_the_toml_names_and_errors_list_them() {
        round_trips::<BackendKind>();
        round_trips::<LoaderKind>();
        round_trips::<SinkKind>();
        round_trips::<Dtype>();
        round_trips::<Precision>();
        round_trips::<Preset>();
    }
}
