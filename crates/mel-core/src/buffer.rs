//! Typed output buffers shared by backends and sinks.

use half::{bf16, f16};

use crate::spec::Dtype;

/// An owned buffer of output values in one of the stored dtypes.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputBuf {
    /// f32 values.
    F32(Vec<f32>),
    /// f16 values.
    F16(Vec<f16>),
    /// bf16 values.
    Bf16(Vec<bf16>),
}

/// A mutable view of output values in one of the stored dtypes.
#[derive(Debug)]
pub enum OutputSlice<'a> {
    /// f32 values.
    F32(&'a mut [f32]),
    /// f16 values.
    F16(&'a mut [f16]),
    /// bf16 values.
    Bf16(&'a mut [bf16]),
}

impl OutputBuf {
    /// A zeroed buffer of `len` values.
    pub fn zeros(dtype: Dtype, len: usize) -> Self {
        match dtype {
            Dtype::F32 => OutputBuf::F32(vec![0.0; len]),
            Dtype::F16 => OutputBuf::F16(vec![f16::ZERO; len]),
            Dtype::Bf16 => OutputBuf::Bf16(vec![bf16::ZERO; len]),
        }
    }

    /// A zeroed buffer of `len` values, or `None` where the memory cannot be had (an
    /// error to report, where [`zeros`](Self::zeros) would abort the process).
    pub fn try_zeros(dtype: Dtype, len: usize) -> Option<Self> {
        fn filled<T: Copy>(len: usize, zero: T) -> Option<Vec<T>> {
            let mut v = Vec::new();
            v.try_reserve_exact(len).ok()?;
            v.resize(len, zero);
            Some(v)
        }
        Some(match dtype {
            Dtype::F32 => OutputBuf::F32(filled(len, 0.0)?),
            Dtype::F16 => OutputBuf::F16(filled(len, f16::ZERO)?),
            Dtype::Bf16 => OutputBuf::Bf16(filled(len, bf16::ZERO)?),
        })
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        match self {
            OutputBuf::F32(_) => Dtype::F32,
            OutputBuf::F16(_) => Dtype::F16,
            OutputBuf::Bf16(_) => Dtype::Bf16,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            OutputBuf::F32(v) => v.len(),
            OutputBuf::F16(v) => v.len(),
            OutputBuf::Bf16(v) => v.len(),
        }
    }

    /// Whether the buffer holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resizes to `len` values (new values are zero).
    pub fn resize(&mut self, len: usize) {
        match self {
            OutputBuf::F32(v) => v.resize(len, 0.0),
            OutputBuf::F16(v) => v.resize(len, f16::ZERO),
            OutputBuf::Bf16(v) => v.resize(len, bf16::ZERO),
        }
    }

    /// Keeps the clips of `per` values whose flag in `keep` is true, in order, moved
    /// to the front; the buffer shrinks to them.
    pub fn retain_clips(&mut self, per: usize, keep: &[bool]) {
        fn retain<T: Copy>(v: &mut Vec<T>, per: usize, keep: &[bool]) {
            let mut kept = 0;
            for (k, _) in keep.iter().enumerate().filter(|(_, keep)| **keep) {
                if k != kept {
                    v.copy_within(k * per..(k + 1) * per, kept * per);
                }
                kept += 1;
            }
            v.truncate(kept * per);
        }
        match self {
            OutputBuf::F32(v) => retain(v, per, keep),
            OutputBuf::F16(v) => retain(v, per, keep),
            OutputBuf::Bf16(v) => retain(v, per, keep),
        }
    }

    /// The values as little-endian bytes (native layout).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            OutputBuf::F32(v) => bytemuck::cast_slice(v),
            OutputBuf::F16(v) => bytemuck::cast_slice(v),
            OutputBuf::Bf16(v) => bytemuck::cast_slice(v),
        }
    }

    /// A mutable view of values `range`.
    pub fn slice_mut(&mut self, range: std::ops::Range<usize>) -> OutputSlice<'_> {
        match self {
            OutputBuf::F32(v) => OutputSlice::F32(&mut v[range]),
            OutputBuf::F16(v) => OutputSlice::F16(&mut v[range]),
            OutputBuf::Bf16(v) => OutputSlice::Bf16(&mut v[range]),
        }
    }

    /// A mutable view of all values.
    pub fn as_mut_slice(&mut self) -> OutputSlice<'_> {
        let len = self.len();
        self.slice_mut(0..len)
    }

    /// A buffer holding `bytes` (native layout, as [`as_bytes`](Self::as_bytes) gives),
    /// or `None` when the length is not a whole number of values.
    pub fn from_bytes(dtype: Dtype, bytes: &[u8]) -> Option<Self> {
        if !bytes.len().is_multiple_of(dtype.size()) {
            return None;
        }
        let mut buf = OutputBuf::zeros(dtype, bytes.len() / dtype.size());
        let dst: &mut [u8] = match &mut buf {
            OutputBuf::F32(v) => bytemuck::cast_slice_mut(v),
            OutputBuf::F16(v) => bytemuck::cast_slice_mut(v),
            OutputBuf::Bf16(v) => bytemuck::cast_slice_mut(v),
        };
        dst.copy_from_slice(bytes);
        Some(buf)
    }

    /// Value `i` widened to f64.
    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            OutputBuf::F32(v) => v[i] as f64,
            OutputBuf::F16(v) => v[i].to_f64(),
            OutputBuf::Bf16(v) => v[i].to_f64(),
        }
    }
}

impl OutputSlice<'_> {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            OutputSlice::F32(v) => v.len(),
            OutputSlice::F16(v) => v.len(),
            OutputSlice::Bf16(v) => v.len(),
        }
    }

    /// Whether the view holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        match self {
            OutputSlice::F32(_) => Dtype::F32,
            OutputSlice::F16(_) => Dtype::F16,
            OutputSlice::Bf16(_) => Dtype::Bf16,
        }
    }
}

/// Buffers handed from one run (or loader) to the next, so their pages are faulted in
/// once per build rather than once per split; cloning shares them. The one recycling
/// list of the workspace: the runner's output buffers (`Spares<OutputBuf>`) and the
/// streaming loaders' sample buffers (`Spares<Vec<f32>>`). A poisoned lock is recovered:
/// the buffers are plain data, whatever a panicking thread was doing with the list.
#[derive(Debug)]
pub struct Spares<T>(std::sync::Arc<std::sync::Mutex<Vec<T>>>);

impl<T> Clone for Spares<T> {
    fn clone(&self) -> Self {
        Spares(self.0.clone())
    }
}

impl<T> Default for Spares<T> {
    fn default() -> Self {
        Spares(Default::default())
    }
}

impl<T> Spares<T> {
    fn list(&self) -> std::sync::MutexGuard<'_, Vec<T>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Buffers held now (between runs: those the last one left).
    pub fn held(&self) -> usize {
        self.list().len()
    }

    /// Up to `n` of the held buffers, the last given first; the rest stay.
    pub fn take(&self, n: usize) -> Vec<T> {
        let mut held = self.list();
        let keep = held.len().saturating_sub(n);
        held.split_off(keep)
    }

    /// Every held buffer.
    pub fn take_all(&self) -> Vec<T> {
        std::mem::take(&mut *self.list())
    }

    /// Hands buffers back for the next run.
    pub fn give(&self, bufs: impl IntoIterator<Item = T>) {
        self.list().extend(bufs);
    }
}
