//! The configuration `melctl.build` and `melctl.Extractor` use, layered as the CLI layers
//! it: a preset, then a configuration (a TOML file or a dict of sections), then keyword
//! overrides (`n_mels=64`, `dtype="f32"`, `run__threads=4`). Every layer goes through
//! mel-core's TOML merge, so an unknown or mistyped key is refused by the same checks.

use std::path::PathBuf;

use melkit::core::{Config, Preset};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::to_py;

/// A Python value as TOML: bool, int, float, str, list/tuple, dict with str keys.
fn to_toml(key: &str, v: &Bound<'_, PyAny>) -> PyResult<toml::Value> {
    let bad = |what: &str| PyTypeError::new_err(format!("{key}: {what} has no TOML form"));
    if v.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        let i: i64 = v
            .extract()
            .map_err(|_| PyValueError::new_err(format!("{key}: {v} is out of range")))?;
        return Ok(toml::Value::Integer(i));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(v.extract()?));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(toml::Value::String(s.to_str()?.to_string()));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: PyResult<Vec<toml::Value>> = v.try_iter()?.map(|x| to_toml(key, &x?)).collect();
        return Ok(toml::Value::Array(items?));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        return Ok(toml::Value::Table(table(key, d)?));
    }
    Err(bad(&v.get_type().name()?.to_string()))
}

/// A dict with string keys as a TOML table.
fn table(key: &str, d: &Bound<'_, PyDict>) -> PyResult<toml::Table> {
    let mut t = toml::Table::new();
    for (k, v) in d.iter() {
        let k: String = k
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("{key}: a key is not a str")))?;
        let path = if key.is_empty() {
            k.clone()
        } else {
            format!("{key}.{k}")
        };
        // None is TOML's absent key: the default (a stored configuration's
        // `run.device = null`), so `split.config` can be given back as a configuration.
        if v.is_none() {
            continue;
        }
        t.insert(k, to_toml(&path, &v)?);
    }
    Ok(t)
}

/// Where an override lands: `section__key` (`__` for each dot) as written, a bare key
/// where exactly one section holds it (`n_mels` is `mel.n_mels`; `top_db` is `log.top_db`
/// though it is unset by default), or a whole section given as a dict
/// (`mel={"n_mels": 64}`). `keys` is [`Config::key_paths`]: every key there is.
fn override_path(keys: &[String], key: &str) -> PyResult<Vec<String>> {
    if key.contains("__") {
        return Ok(key.split("__").map(str::to_string).collect());
    }
    let section = format!("{key}.");
    if keys.iter().any(|p| p.starts_with(&section)) {
        return Ok(vec![key.to_string()]);
    }
    let found: Vec<&String> = keys
        .iter()
        .filter(|p| p.rsplit_once('.').is_some_and(|(_, last)| last == key))
        .collect();
    match found.len() {
        1 => Ok(found[0].split('.').map(str::to_string).collect()),
        0 => Err(PyValueError::new_err(format!(
            "{key}: no configuration key of that name (`melctl config` prints them all)"
        ))),
        _ => Err(PyValueError::new_err(format!(
            "{key} is ambiguous: {} (write it as {})",
            found
                .iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            found
                .iter()
                .map(|p| p.replace('.', "__"))
                .collect::<Vec<_>>()
                .join(" or ")
        ))),
    }
}

/// Sets `value` at `path` in `overlay`, making the tables on the way.
fn set_path(overlay: &mut toml::Table, path: &[String], value: toml::Value) -> PyResult<()> {
    let (last, parents) = path.split_last().expect("a path has a key");
    let mut t = overlay;
    for p in parents {
        let entry = t
            .entry(p.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = entry.as_table_mut().ok_or_else(|| {
            PyValueError::new_err(format!("{}: {p} is not a section", path.join(".")))
        })?;
    }
    match (t.get_mut(last), value) {
        (Some(toml::Value::Table(a)), toml::Value::Table(b)) => a.extend(b),
        (_, v) => {
            t.insert(last.clone(), v);
        }
    }
    Ok(())
}

/// Merges a TOML table onto `base` with mel-core's layering and checks.
fn merge(base: &Config, overlay: toml::Table, source: &str) -> PyResult<Config> {
    let text =
        toml::to_string(&overlay).map_err(|e| PyValueError::new_err(format!("{source}: {e}")))?;
    Config::merge_toml(base, &text, Some(source)).map_err(to_py)
}

/// The configuration: `preset`, then `config` (a path to a TOML file, or a dict of
/// sections), then `backend` (unless None), then `overrides`.
pub fn resolve(
    preset: &str,
    config: Option<&Bound<'_, PyAny>>,
    backend: Option<&str>,
    overrides: Option<&Bound<'_, PyDict>>,
) -> PyResult<Config> {
    let mut c = Preset::from_name(preset).map_err(to_py)?.config();
    if let Some(cfg) = config {
        if let Ok(d) = cfg.cast::<PyDict>() {
            c = merge(&c, table("", d)?, "config")?;
        } else {
            let path: PathBuf = cfg.extract().map_err(|_| {
                PyTypeError::new_err("config must be a path to a TOML file or a dict of sections")
            })?;
            c = Config::merge_file(&c, &path).map_err(to_py)?;
        }
    }
    let all = Config::key_paths();
    let mut overlay = toml::Table::new();
    if let Some(b) = backend {
        set_path(
            &mut overlay,
            &["run".into(), "backend".into()],
            toml::Value::String(b.to_string()),
        )?;
    }
    if let Some(o) = overrides {
        // Two keywords that name one key (`n_mels` and `mel__n_mels`) are refused: one
        // would silently win.
        let mut named: std::collections::HashMap<Vec<String>, String> = Default::default();
        for (k, v) in o.iter() {
            let key: String = k.extract()?;
            let path = override_path(&all, &key)?;
            if let Some(first) = named.insert(path.clone(), key.clone()) {
                return Err(PyValueError::new_err(format!(
                    "{first} and {key} both set {}: give it once",
                    path.join(".")
                )));
            }
            set_path(&mut overlay, &path, to_toml(&key, &v)?)?;
        }
    }
    if !overlay.is_empty() {
        c = merge(&c, overlay, "keyword arguments")?;
    }
    Ok(c)
}
