//! One resolution for every front end: a preset, then a base (a TOML file or a table),
//! then overrides (CLI flags, Python keywords), each layer merged by the same TOML
//! checks, so a mistyped key or value is refused the same way wherever it was given.

use std::path::PathBuf;

use super::{Config, Preset, merge_table};
use crate::error::{Error, Result};

/// The configuration a preset is overridden by: a TOML file, or a table given in memory
/// (a Python dict of sections).
#[derive(Debug, Clone, PartialEq)]
pub enum Base {
    /// A TOML file, read bounded (see [`Config::merge_file`]).
    File(PathBuf),
    /// A table of sections, named `source` in errors.
    Table {
        /// The sections.
        table: toml::Table,
        /// What the table is called in an error (`config`).
        source: String,
    },
}

/// Single keys set last, each remembered with the word it was given by (`--threads`,
/// `n_mels`), so an error on that key can be said in the user's words.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    table: toml::Table,
    words: Vec<(String, String)>,
}

/// The layers of one configuration, applied in order: preset, base, overrides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Layers {
    /// The complete configuration everything else overrides.
    pub preset: Preset,
    /// The file or table whose keys override the preset.
    pub base: Option<Base>,
    /// The keys set last.
    pub overrides: Overrides,
}

impl Layers {
    /// The configuration the layers describe (not yet validated: see `MelPlan::new`).
    pub fn resolve(&self) -> Result<Config> {
        let mut config = self.preset.config();
        match &self.base {
            // Bounded by the bytes read and never blocking: a FIFO or /dev/zero is refused.
            Some(Base::File(path)) => config = Config::merge_file(&config, path)?,
            Some(Base::Table { table, source }) => {
                config = merge_table(&config, table.clone(), Some(source))?
            }
            None => {}
        }
        if !self.overrides.table.is_empty() {
            config = merge_table(&config, self.overrides.table.clone(), Some("overrides"))?;
        }
        Ok(config)
    }
}

impl Overrides {
    /// Sets `key` to `value`, as the user's `word` gave it. `key` is a dotted path
    /// (`mel.n_mels`), the same with `__` for each dot (`mel__n_mels`), a section given
    /// a table (`mel`), or a bare key exactly one section holds (`n_mels`; `top_db` is
    /// `log.top_db` though unset by default). A key set twice is refused: one value would
    /// silently win.
    pub fn set(&mut self, key: &str, word: &str, value: toml::Value) -> Result<()> {
        let path = key_path(key)?;
        // Every key the value sets (a section given as a table sets each of its keys), so
        // `mel={"n_mels": 16}` and `n_mels=64` are one key given twice.
        let mut leaves = Vec::new();
        leaf_keys(&path.join("."), &value, &mut leaves);
        for leaf in &leaves {
            let overlaps = |k: &String| {
                k == leaf
                    || k.starts_with(&format!("{leaf}."))
                    || leaf.starts_with(&format!("{k}."))
            };
            if let Some((_, first)) = self.words.iter().find(|(k, _)| overlaps(k)) {
                return Err(Error::config(
                    leaf.clone(),
                    format!("set twice, as {first} and {word}: give it once"),
                ));
            }
        }
        set_path(&mut self.table, &path, value)?;
        self.words
            .extend(leaves.into_iter().map(|leaf| (leaf, word.to_string())));
        Ok(())
    }

    /// Sets `key` to `value` if there is one (a flag that was given), as its TOML form.
    pub fn set_some<T: serde::Serialize>(
        &mut self,
        key: &str,
        word: &str,
        value: Option<&T>,
    ) -> Result<()> {
        let Some(v) = value else { return Ok(()) };
        let v = toml::Value::try_from(v).map_err(|e| {
            Error::config(
                key,
                format!("{word}: {}", crate::error::one_line(&e.to_string())),
            )
        })?;
        self.set(key, word, v)
    }

    /// `e` in the user's words: a configuration error on a key an override set names the
    /// word that set it (`run.threads (--threads)`).
    pub fn in_words(&self, e: Error) -> Error {
        match e {
            Error::Config { field, message } => {
                match self.words.iter().find(|(k, w)| *k == field && *w != field) {
                    Some((_, word)) => Error::config(format!("{field} ({word})"), message),
                    None => Error::Config { field, message },
                }
            }
            e => e,
        }
    }
}

/// The path of the key a user wrote (see [`Overrides::set`]).
fn key_path(key: &str) -> Result<Vec<String>> {
    let sep = if key.contains("__") { "__" } else { "." };
    if key.contains(sep) {
        return Ok(key.split(sep).map(str::to_string).collect());
    }
    let all = Config::key_paths();
    let section = format!("{key}.");
    if all.iter().any(|p| p.starts_with(&section)) {
        return Ok(vec![key.to_string()]);
    }
    let found: Vec<&String> = all
        .iter()
        .filter(|p| p.rsplit_once('.').is_some_and(|(_, last)| last == key))
        .collect();
    match found.as_slice() {
        [one] => Ok(one.split('.').map(str::to_string).collect()),
        [] => Err(Error::config(
            key,
            "no configuration key of that name (`melctl config` prints them all)",
        )),
        many => Err(Error::config(
            key,
            format!(
                "ambiguous: {} (write it as {})",
                many.iter()
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                many.iter()
                    .map(|p| p.replace('.', "__"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        )),
    }
}

/// The dotted path of every key `value` sets at `path`: the path itself for a value, each
/// leaf for a table (an empty table sets nothing).
fn leaf_keys(path: &str, value: &toml::Value, out: &mut Vec<String>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                leaf_keys(&format!("{path}.{k}"), v, out);
            }
        }
        _ => out.push(path.to_string()),
    }
}

/// Sets `value` at `path` in `overlay`, making the tables on the way; a table given for a
/// section already set is merged into it.
fn set_path(overlay: &mut toml::Table, path: &[String], value: toml::Value) -> Result<()> {
    let (last, parents) = path
        .split_last()
        .ok_or_else(|| Error::config("", "an empty key"))?;
    let mut t = overlay;
    for p in parents {
        let entry = t
            .entry(p.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = entry
            .as_table_mut()
            .ok_or_else(|| Error::config(path.join("."), format!("{p} is not a section")))?;
    }
    match (t.get_mut(last), value) {
        (Some(toml::Value::Table(a)), toml::Value::Table(b)) => a.extend(b),
        (_, v) => {
            t.insert(last.clone(), v);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(pairs: &[(&str, toml::Value)]) -> Result<Config> {
        let mut layers = Layers::default();
        for (key, value) in pairs {
            layers.overrides.set(key, key, value.clone())?;
        }
        layers.resolve()
    }

    #[test]
    fn a_key_may_be_written_dotted_with_underscores_or_bare() {
        for key in ["mel.n_mels", "mel__n_mels", "n_mels"] {
            let c = given(&[(key, 64.into())]).unwrap();
            assert_eq!(c.mel.n_mels, 64, "{key}");
        }
        let c = given(&[("mel", toml::Value::Table(toml::toml! { n_mels = 40 }))]).unwrap();
        assert_eq!(c.mel.n_mels, 40);
    }

    #[test]
    fn an_unknown_ambiguous_or_twice_set_key_is_refused_by_name() {
        let e = given(&[("no_such_key", 1.into())]).unwrap_err().to_string();
        assert!(e.contains("no_such_key: no configuration key"), "{e}");
        let e = given(&[("hop", 1.into())]).unwrap_err().to_string();
        assert!(
            e.contains("hop: ambiguous: segment.long.hop, segment.short.hop"),
            "{e}"
        );
        let e = given(&[("n_mels", 64.into()), ("mel__n_mels", 32.into())])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mel.n_mels: set twice, as n_mels and mel__n_mels"),
            "{e}"
        );
    }

    #[test]
    fn a_section_and_a_key_inside_it_are_one_key_given_twice() {
        let mel = toml::Value::Table(toml::toml! { n_mels = 16 });
        let e = given(&[("mel", mel.clone()), ("n_mels", 64.into())])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mel.n_mels: set twice, as mel and n_mels"),
            "{e}"
        );
        let e = given(&[("n_mels", 64.into()), ("mel", mel.clone())])
            .unwrap_err()
            .to_string();
        assert!(e.contains("mel.n_mels: set twice"), "{e}");
        // Other keys of the same section are not the same key.
        let c = given(&[("mel", mel), ("mel__n_fft", 256.into())]).unwrap();
        assert_eq!((c.mel.n_mels, c.mel.n_fft), (16, 256));
    }

    #[test]
    fn a_section_given_an_array_is_refused_by_name() {
        let list = toml::Value::Array(vec![512.into()]);
        let e = given(&[("mel", list)]).unwrap_err().to_string();
        assert!(
            e.contains("`mel` is a section: expected a table of its keys, found array"),
            "{e}"
        );
        let e = Config::from_toml("[segment]\nlong = [4096, 2048]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`segment.long` is a section"), "{e}");
    }

    #[test]
    fn a_wrong_value_is_refused_by_the_same_checks_as_a_file() {
        let e = given(&[("mel.n_mels", "many".into())]).unwrap_err();
        assert!(matches!(e, Error::ConfigParse { .. }), "{e}");
        assert!(e.to_string().contains("n_mels"), "{e}");
    }

    #[test]
    fn overrides_beat_the_base_which_beats_the_preset() {
        let mut layers = Layers {
            base: Some(Base::Table {
                table: toml::toml! { [mel] n_mels = 40 [run] threads = 3 },
                source: "config".into(),
            }),
            ..Layers::default()
        };
        layers
            .overrides
            .set("run.threads", "--threads", 5.into())
            .unwrap();
        let c = layers.resolve().unwrap();
        assert_eq!((c.mel.n_mels, c.run.threads), (40, 5));
        assert_eq!(c.audio, Preset::default().config().audio);
    }

    #[test]
    fn an_error_on_an_overridden_key_names_the_word_that_set_it() {
        let mut o = Overrides::default();
        o.set("run.threads", "--threads", 5.into()).unwrap();
        let named = o.in_words(Error::config("run.threads", "too many"));
        assert_eq!(
            named.to_string(),
            "invalid configuration: run.threads (--threads): too many"
        );
        let other = o.in_words(Error::config("mel.n_mels", "too many"));
        assert_eq!(
            other.to_string(),
            "invalid configuration: mel.n_mels: too many"
        );
    }
}
