//! The element types a clip or segment is handed to numpy in, and the conversion of one
//! item to them: float32 (f16/bf16 widened exactly), float64 (f32 widened exactly), or
//! float16 as stored (f16 data only: nothing is rounded).

use half::f16;
use melkit::read::{Dtype, Split};
use ndarray::ArrayD;
use numpy::PyArray;
use pyo3::prelude::*;

/// The numpy element type of items read from a split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemDtype {
    /// float32: every stored type widened exactly (the default).
    F32,
    /// float64: the float32 values widened exactly.
    F64,
    /// float16 as stored (f16 splits only).
    F16,
}

impl ItemDtype {
    /// Reads a numpy dtype-like (`"float32"`, `numpy.float16`, `numpy.dtype("f8")`).
    pub fn parse(obj: &Bound<'_, PyAny>) -> PyResult<ItemDtype> {
        let numpy = obj.py().import("numpy")?;
        let name: String = numpy
            .call_method1("dtype", (obj,))?
            .getattr("name")?
            .extract()?;
        match name.as_str() {
            "float32" => Ok(ItemDtype::F32),
            "float64" => Ok(ItemDtype::F64),
            "float16" => Ok(ItemDtype::F16),
            other => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "dtype {other} is not offered: float32, float64, or float16 (f16 splits)"
            ))),
        }
    }

    /// numpy's name for it.
    pub fn name(self) -> &'static str {
        match self {
            ItemDtype::F32 => "float32",
            ItemDtype::F64 => "float64",
            ItemDtype::F16 => "float16",
        }
    }

    /// Refuses float16 for a split that does not store f16 (it would round values).
    pub fn check(self, split: &Split) -> melkit::read::Result<()> {
        if self == ItemDtype::F16 && split.dtype() != Dtype::F16 {
            return Err(melkit::read::Error::config(
                "dtype",
                format!(
                    "float16 is offered for splits stored as f16; this one stores {:?}: ask \
                     float32 or float64",
                    split.dtype()
                ),
            ));
        }
        Ok(())
    }
}

/// One item's values in the element type asked for.
#[derive(Debug)]
pub enum Item {
    /// float32 values.
    F32(ArrayD<f32>),
    /// float64 values.
    F64(ArrayD<f64>),
    /// float16 values as stored.
    F16(ArrayD<f16>),
}

impl Item {
    /// Hands the values to numpy without copying them (the array owns the buffer).
    pub fn into_numpy(self, py: Python<'_>) -> Bound<'_, PyAny> {
        match self {
            Item::F32(a) => PyArray::from_owned_array(py, a).into_any(),
            Item::F64(a) => PyArray::from_owned_array(py, a).into_any(),
            Item::F16(a) => PyArray::from_owned_array(py, a).into_any(),
        }
    }
}

/// Reads clip `clip` (or its segment `segment`) of `split` as `dtype`; call it with the
/// GIL released.
pub fn read_item(
    split: &Split,
    clip: usize,
    segment: Option<usize>,
    dtype: ItemDtype,
) -> melkit::read::Result<Item> {
    dtype.check(split)?;
    if split.whole().is_some() {
        if segment.is_some() {
            return Err(melkit::read::Error::Shape(
                "whole clips have no segments".into(),
            ));
        }
        let a = split.whole_clip(clip)?.into_dyn();
        return Ok(match dtype {
            ItemDtype::F32 => Item::F32(a),
            ItemDtype::F64 => Item::F64(a.mapv(f64::from)),
            // Stored f16 values, widened exactly and narrowed back.
            ItemDtype::F16 => Item::F16(a.mapv(f16::from_f32)),
        });
    }
    let f32_item = || match segment {
        None => split.clip(clip),
        Some(s) => split.segment(clip, s).map(|a| a.into_dyn()),
    };
    Ok(match dtype {
        ItemDtype::F32 => Item::F32(f32_item()?),
        ItemDtype::F64 => Item::F64(f32_item()?.mapv(f64::from)),
        ItemDtype::F16 => Item::F16(read_f16(split, clip, segment)?),
    })
}

/// The stored f16 values of an item, checked finite as every read of melread is.
fn read_f16(
    split: &Split,
    clip: usize,
    segment: Option<usize>,
) -> melkit::read::Result<ArrayD<f16>> {
    let mut reader = split.reader();
    let bytes = reader.raw(clip, segment)?;
    let values: Vec<f16> = bytes
        .chunks_exact(2)
        .map(|b| f16::from_le_bytes([b[0], b[1]]))
        .collect();
    if values.iter().any(|v| !v.is_finite()) {
        return Err(melkit::read::Error::Dataset {
            root: split.path().to_path_buf(),
            reason: format!(
                "clip {clip}{} holds a value that is not finite (NaN or infinity), which melctl \
                 never stores",
                segment.map(|s| format!(" segment {s}")).unwrap_or_default()
            ),
        });
    }
    let shape = match segment {
        None => split.clip_shape().to_vec(),
        Some(_) => split.segment_shape().to_vec(),
    };
    ArrayD::from_shape_vec(shape, values)
        .map_err(|e| melkit::read::Error::Shape(format!("an f16 item: {e}")))
}
