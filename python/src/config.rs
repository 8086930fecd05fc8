//! The configuration `melctl.build` and `melctl.Extractor` use, resolved by the CLI's
//! [`Layers`]: a preset, then a configuration (a TOML file or a dict of sections), then
//! keyword overrides (`n_mels=64`, `dtype="f32"`, `run__threads=4`), where CLI flags are
//! overrides too. Here only Python values become TOML.

use std::path::PathBuf;

use melkit::core::config::{Base, Layers, Overrides};
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
    // numpy's integers (np.int64) are integers too: anything with `__index__`.
    if !v.is_instance_of::<PyInt>()
        && !v.is_instance_of::<PyFloat>()
        && let Ok(i) = v.call_method0("__index__")
    {
        return to_toml(key, &i);
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
        return Ok(toml::Value::String(s.to_cow()?.into_owned()));
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
        let k: String = k.extract().map_err(|_| {
            let whose = if key.is_empty() { "config" } else { key };
            PyTypeError::new_err(format!("{whose}: a key is not a str"))
        })?;
        let path = if key.is_empty() {
            k.clone()
        } else {
            format!("{key}.{k}")
        };
        // None is TOML's absent key, for the keys that may be unset (a stored
        // configuration's `run.device = null`, so `split.config` can be given back as a
        // configuration); for any other key it would silently keep the preset's value.
        if v.is_none() {
            let optional = Config::optional_keys();
            if optional.contains(&path.replace("__", ".")) {
                continue;
            }
            return Err(PyValueError::new_err(format!(
                "{path}: None is not a value for it (only {} may be None)",
                optional.join(", ")
            )));
        }
        t.insert(k, to_toml(&path, &v)?);
    }
    Ok(t)
}

/// The configuration: `preset`, then `config` (a path to a TOML file, or a dict of
/// sections), then the `named` arguments given (key, argument, value: `backend=`,
/// `cache_dir=`), then `overrides`; every key once.
pub fn resolve(
    preset: &str,
    config: Option<&Bound<'_, PyAny>>,
    named: &[(&str, &str, Option<String>)],
    overrides: Option<&Bound<'_, PyDict>>,
) -> PyResult<Config> {
    let base = match config {
        None => None,
        Some(cfg) => match cfg.cast::<PyDict>() {
            Ok(d) => Some(Base::Table {
                table: table("", d)?,
                source: "config".into(),
            }),
            Err(_) => Some(Base::File(cfg.extract::<PathBuf>().map_err(|_| {
                PyTypeError::new_err("config must be a path to a TOML file or a dict of sections")
            })?)),
        },
    };
    let mut words = Overrides::default();
    for (key, word, value) in named {
        if let Some(v) = value {
            words
                .set(key, word, toml::Value::String(v.clone()))
                .map_err(to_py)?;
        }
    }
    for (k, v) in overrides.into_iter().flat_map(|o| o.iter()) {
        let key: String = k.extract()?;
        words.set(&key, &key, to_toml(&key, &v)?).map_err(to_py)?;
    }
    let layers = Layers {
        preset: Preset::from_name(preset).map_err(to_py)?,
        base,
        overrides: words,
    };
    layers.resolve().map_err(to_py)
}
