//! Splits used together (a model trained on one, evaluated on another) must mean the same
//! thing by the same numbers: one label map (class id → name) and one mel configuration.
//! A validation split built with its label map reversed would otherwise score a perfect
//! model at 0, and one built at another sample rate would feed it other features.

use mel_core::config::Sameness;
use mel_core::{Error, Result};
use serde_json::Value;

use crate::Split;

/// What two splits read together must share: mel-core's one definition
/// ([`Sameness::Meaning`]: the audio, segmentation, mel and log settings; not the
/// element type nor the transform's precision, which change rounding, not meaning).
const SAME: Sameness = Sameness::Meaning;

impl Split {
    /// Refuses `other` for use with this split unless both have the same label names in
    /// the same order, the same clip shape, and the same audio, segmentation, mel and log
    /// configuration (an output that stores none can only be used with another that
    /// stores none). The error names both splits and the first difference.
    pub fn check_compatible(&self, other: &Split) -> Result<()> {
        let refuse = |what: String| {
            Err(Error::Dataset {
                root: other.path().to_path_buf(),
                reason: format!(
                    "split {:?} cannot be used with split {:?} ({}): {what}",
                    other.name(),
                    self.name(),
                    self.path().display()
                ),
            })
        };
        let (a, b) = (self.name(), other.name());
        if let Err(what) = meaning_differs(
            (a, self.label_names(), self.config()),
            (b, other.label_names(), other.config()),
        ) {
            return refuse(what);
        }
        if self.clip_shape() != other.clip_shape() {
            return refuse(format!(
                "their clips differ in shape: {:?} ({}) in {a}, {:?} ({}) in {b}",
                self.clip_shape(),
                self.dims()[1..].join(","),
                other.clip_shape(),
                other.dims()[1..].join(",")
            ));
        }
        Ok(())
    }

    /// Refuses this split for use beside a split built with `label_names` and the stored
    /// configuration `config` (a build's `resolved_json`), named `name`: the label maps
    /// and the audio, segmentation, mel and log configurations must be the same. A
    /// `--split` build checks the splits it keeps against what it builds with this.
    pub fn check_matches(&self, name: &str, label_names: &[String], config: &Value) -> Result<()> {
        meaning_differs(
            (self.name(), self.label_names(), self.config()),
            (name, label_names, Some(config)),
        )
        .map_err(|what| Error::Dataset {
            root: self.path().to_path_buf(),
            reason: format!(
                "split {:?} cannot be used with split {name:?}: {what}",
                self.name()
            ),
        })
    }
}

/// Where splits `a` and `b` (name, label names, stored configuration) differ in meaning:
/// the first differing class, or the first differing configuration value by its path.
fn meaning_differs(
    (a, na, ca): (&str, &[String], Option<&Value>),
    (b, nb, cb): (&str, &[String], Option<&Value>),
) -> std::result::Result<(), String> {
    let refuse = |what: String| Err(what);
    {
        if na != nb {
            let what = match (0..na.len().max(nb.len())).find(|&i| na.get(i) != nb.get(i)) {
                Some(i) => format!(
                    "their label maps differ: class {i} is {} in {a} and {} in {b}",
                    show(na.get(i)),
                    show(nb.get(i))
                ),
                None => "their label maps differ".to_string(),
            };
            return refuse(what);
        }
        match (ca, cb) {
            (None, None) => {}
            (Some(_), None) | (None, Some(_)) => {
                return refuse(format!(
                    "{} stores its mel configuration and {} does not, so they cannot be checked to match",
                    if ca.is_some() { a } else { b },
                    if ca.is_some() { b } else { a },
                ));
            }
            (Some(ca), Some(cb)) => {
                let (va, vb) = (SAME.view(ca), SAME.view(cb));
                let sections = va.as_object().into_iter().flat_map(|m| m.keys());
                for key in sections {
                    if let Some((at, va, vb)) = first_difference(key, &va[key], &vb[key]) {
                        return refuse(format!(
                            "their mel configurations differ: {at} is {va} in {a} and {vb} in {b}"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

fn show(name: Option<&String>) -> String {
    name.map_or("absent".to_string(), |n| format!("{n:?}"))
}

/// The first place (a dotted path) where `a` and `b` differ, with both values.
fn first_difference(at: &str, a: &Value, b: &Value) -> Option<(String, String, String)> {
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => {
            let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                first_difference(
                    &format!("{at}.{k}"),
                    ma.get(k).unwrap_or(&Value::Null),
                    mb.get(k).unwrap_or(&Value::Null),
                )
            })
        }
        _ if a == b => None,
        _ => Some((at.to_string(), text(a), text(b))),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "absent".to_string(),
        v => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_difference_is_named_with_its_path() {
        let a = json!({"sample_rate": 8000, "pad": {"mode": "zero"}});
        let b = json!({"sample_rate": 8000, "pad": {"mode": "wrap"}});
        assert_eq!(
            first_difference("audio", &a, &b),
            Some((
                "audio.pad.mode".into(),
                "\"zero\"".into(),
                "\"wrap\"".into()
            ))
        );
        assert_eq!(first_difference("audio", &a, &a), None);
        let c = json!({"sample_rate": 8000});
        assert_eq!(
            first_difference("audio", &a, &c).unwrap().2,
            "absent".to_string()
        );
    }
}
