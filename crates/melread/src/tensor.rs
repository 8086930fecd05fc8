//! Batches as candle-core tensors (the `candle` feature).
//!
//! `to_tensors` gives `(values, labels)`: values `[items, ...item shape]` on the chosen
//! device, labels `[items]` as `u32` (what `candle_nn::loss::cross_entropy` takes).
//! f16/bf16 batches ([`Output::Stored`](crate::Output::Stored)) stay f16/bf16 with
//! [`TensorFloat::Keep`], halving what crosses to a GPU, or become f32 with
//! [`TensorFloat::F32`]: on the CPU by `half`'s slice conversion, on another device after
//! the upload, by the device.

use candle_core::{DType, Device, Tensor};
use half::slice::HalfFloatSliceExt;
use mel_core::{Error, Result};

use crate::loader::{Batch, Values};
use mel_core::stats::MelStats;

/// The floating-point type of a batch's tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TensorFloat {
    /// The batch's own type (f32, or f16/bf16 as stored).
    Keep,
    /// f32 whatever the batch holds.
    #[default]
    F32,
}

fn candle_err(e: candle_core::Error) -> Error {
    Error::device("candle", e.to_string())
}

impl Batch {
    /// The batch's values and labels as tensors on `device` (a copy of the values; the
    /// buffer goes back to the loader when the batch is dropped).
    pub fn to_tensors(&self, device: &Device, float: TensorFloat) -> Result<(Tensor, Tensor)> {
        let shape = self.shape().to_vec();
        let values = match (self.values(), float) {
            (Values::F32(v), _) => Tensor::from_slice(v, shape, device),
            (Values::F16(v), TensorFloat::Keep) => Tensor::from_slice(v, shape, device),
            (Values::Bf16(v), TensorFloat::Keep) => Tensor::from_slice(v, shape, device),
            (Values::F16(v), TensorFloat::F32) if device.is_cpu() => {
                Tensor::from_vec(v.to_f32_vec(), shape, device)
            }
            (Values::Bf16(v), TensorFloat::F32) if device.is_cpu() => {
                Tensor::from_vec(v.to_f32_vec(), shape, device)
            }
            (Values::F16(v), TensorFloat::F32) => {
                Tensor::from_slice(v, shape, device).and_then(|t| t.to_dtype(DType::F32))
            }
            (Values::Bf16(v), TensorFloat::F32) => {
                Tensor::from_slice(v, shape, device).and_then(|t| t.to_dtype(DType::F32))
            }
        }
        .map_err(candle_err)?;
        Ok((values, labels_tensor(self.labels(), device)?))
    }

    /// Like [`to_tensors`](Self::to_tensors), but an f32 batch on the CPU becomes its
    /// tensor without a copy (its buffer leaves the loader, which allocates another).
    pub fn into_tensors(mut self, device: &Device, float: TensorFloat) -> Result<(Tensor, Tensor)> {
        if !device.is_cpu() {
            return self.to_tensors(device, float);
        }
        let shape = self.shape().to_vec();
        match self.take_f32() {
            Some(v) => Ok((
                Tensor::from_vec(v, shape, device).map_err(candle_err)?,
                labels_tensor(self.labels(), device)?,
            )),
            None => self.to_tensors(device, float),
        }
    }
}

/// Class ids as a `u32` tensor `[items]` on `device`.
pub fn labels_tensor(labels: &[i64], device: &Device) -> Result<Tensor> {
    let v: Vec<u32> = labels
        .iter()
        .map(|&l| {
            u32::try_from(l).map_err(|_| Error::Shape(format!("label {l} is not a class id")))
        })
        .collect::<Result<_>>()?;
    let n = v.len();
    Tensor::from_vec(v, n, device).map_err(candle_err)
}

/// Normalises spectrogram tensors `[.., n_mels, frames]` per mel bin on their device,
/// `(x - mean) / std` (a bin with no deviation only centred), computed in f32 and
/// returned in f32: for batches kept in f16/bf16 to cross to a GPU cheaply.
pub fn normalize(values: &Tensor, stats: &MelStats) -> Result<Tensor> {
    let dims = values.dims();
    if dims.len() < 2 || dims[dims.len() - 2] != stats.n_mels() {
        return Err(Error::Shape(format!(
            "a tensor of shape {dims:?} for statistics of {} mel bins",
            stats.n_mels()
        )));
    }
    let (shift, scale) = stats.affine();
    let n = shift.len();
    let device = values.device();
    let shift = Tensor::from_vec(shift, (n, 1), device).map_err(candle_err)?;
    let scale = Tensor::from_vec(scale, (n, 1), device).map_err(candle_err)?;
    values
        .to_dtype(DType::F32)
        .and_then(|x| x.broadcast_sub(&shift))
        .and_then(|x| x.broadcast_mul(&scale))
        .map_err(candle_err)
}
