//! `melctl.Augment`: the Loader's augmentation settings (melread's `Augment`), checked
//! when made and again against the split by the Loader.

use melkit::read::{Augment, Mixup};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::to_py;

/// Augmentation the Loader applies in its Rust threads, off unless asked for.
///
/// ``Augment(time_masks=0, time_mask_frames=0, freq_masks=0, freq_mask_bins=0,
/// gain_db=0.0, mixup_alpha=None, mixup_prob=1.0, time_mask_share=1.0)``
///
/// - **Time and frequency masks** (SpecAugment): ``time_masks`` masks per item, each
///   ``0..=time_mask_frames`` frames wide (at most ``time_mask_share`` of the item's real
///   frames: SpecAugment's ``p``, for sets of short and long clips), and
///   ``freq_masks`` masks of ``0..=freq_mask_bins`` mel bins; masked values become 0
///   (the mean, when the Loader normalises).
/// - **Gain**: a level uniform in ``[-gain_db, +gain_db]`` dB added to each item's
///   log-mel values (scaled by each bin's std when the Loader normalises).
/// - **Mixup**: with ``mixup_alpha`` set, each item (a share ``mixup_prob`` of them) is
///   mixed with another of its batch, ``w·x_i + (1 − w)·x_j``, ``w ~ Beta(α, α)``; the
///   batch's ``y`` is then float32 soft labels ``[batch, classes]`` (a target
///   ``torch.nn.functional.cross_entropy`` takes). An item left unmixed (the others, or
///   the one item of a batch of one) is its own values, bit for bit.
///
/// Every draw is a function of the Loader's seed, the epoch and the item, so batches are
/// the same for any number of threads and bit-identical after ``load_state_dict``.
/// Order: gain, mixup, masks. Masks and gain touch only the real frames of whole
/// clips; mixup gives a short clip's padding ``(1 − w)`` of a longer partner.
///
/// ```python
/// aug = melctl.Augment(time_masks=2, time_mask_frames=20, freq_masks=2,
///                      freq_mask_bins=8, mixup_alpha=0.4)
/// loader = melctl.Loader(path, batch_size=64, augment=aug, max_frames=4000)
/// ```
#[pyclass(name = "Augment", module = "melctl", frozen, eq)]
#[derive(Debug, Clone, PartialEq)]
pub struct PyAugment {
    pub(crate) inner: Augment,
}

/// A count or width of `augment`, checked as the Loader's counts are.
fn count(field: &str, v: i64) -> PyResult<usize> {
    crate::options::count(&format!("augment.{field}"), v)
}

#[pymethods]
impl PyAugment {
    /// Checks the settings that need no split (the Loader checks widths against it).
    #[new]
    #[pyo3(signature = (
        time_masks=0, time_mask_frames=0, freq_masks=0, freq_mask_bins=0, gain_db=0.0,
        mixup_alpha=None, mixup_prob=1.0, time_mask_share=1.0,
    ))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments, one each
    fn new(
        time_masks: i64,
        time_mask_frames: i64,
        freq_masks: i64,
        freq_mask_bins: i64,
        gain_db: f32,
        mixup_alpha: Option<f64>,
        mixup_prob: f64,
        time_mask_share: f32,
    ) -> PyResult<Self> {
        let inner = Augment {
            time_masks: count("time_masks", time_masks)?,
            time_mask_frames: count("time_mask_frames", time_mask_frames)?,
            time_mask_share,
            freq_masks: count("freq_masks", freq_masks)?,
            freq_mask_bins: count("freq_mask_bins", freq_mask_bins)?,
            gain_db,
            mixup: mixup_alpha.map(|alpha| Mixup {
                alpha,
                prob: mixup_prob,
            }),
        };
        if mixup_alpha.is_none() && mixup_prob != 1.0 {
            return Err(to_py(melkit::core::Error::config(
                "augment.mixup_prob",
                format!(
                    "{mixup_prob}: the share of items mixed needs mixup_alpha (no mixup without it)"
                ),
            )));
        }
        // The widths are checked against the split by the Loader.
        inner.check(usize::MAX, usize::MAX).map_err(to_py)?;
        Ok(PyAugment { inner })
    }

    /// Time masks per item.
    #[getter]
    fn time_masks(&self) -> usize {
        self.inner.time_masks
    }

    /// The widest time mask, in frames.
    #[getter]
    fn time_mask_frames(&self) -> usize {
        self.inner.time_mask_frames
    }

    /// The widest time mask as a share of an item's real frames.
    #[getter]
    fn time_mask_share(&self) -> f32 {
        self.inner.time_mask_share
    }

    /// Frequency masks per item.
    #[getter]
    fn freq_masks(&self) -> usize {
        self.inner.freq_masks
    }

    /// The widest frequency mask, in mel bins.
    #[getter]
    fn freq_mask_bins(&self) -> usize {
        self.inner.freq_mask_bins
    }

    /// The gain range, ± dB.
    #[getter]
    fn gain_db(&self) -> f32 {
        self.inner.gain_db
    }

    /// Mixup's Beta(α, α) α, or None (no mixup).
    #[getter]
    fn mixup_alpha(&self) -> Option<f64> {
        self.inner.mixup.map(|m| m.alpha)
    }

    /// The share of items mixed.
    #[getter]
    fn mixup_prob(&self) -> f64 {
        self.inner.mixup.map_or(1.0, |m| m.prob)
    }

    /// Pickles as its settings.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let me = slf.get();
        let args = (
            me.time_masks(),
            me.time_mask_frames(),
            me.freq_masks(),
            me.freq_mask_bins(),
            me.gain_db(),
            me.mixup_alpha(),
            me.mixup_prob(),
            me.time_mask_share(),
        );
        Ok((
            slf.get_type().into_any(),
            args.into_pyobject(py)?.into_any().cast_into()?,
        ))
    }

    fn __repr__(&self) -> String {
        self.text()
    }
}

impl PyAugment {
    /// The settings as `Augment(...)` (also what a Loader's `state_dict` records).
    pub fn text(&self) -> String {
        let a = &self.inner;
        let mixup = match a.mixup {
            Some(m) => format!(", mixup_alpha={}, mixup_prob={}", m.alpha, m.prob),
            None => String::new(),
        };
        let share = if a.time_mask_share == 1.0 {
            String::new()
        } else {
            format!(", time_mask_share={}", a.time_mask_share)
        };
        format!(
            "Augment(time_masks={}, time_mask_frames={}, freq_masks={}, freq_mask_bins={}, gain_db={}{mixup}{share})",
            a.time_masks, a.time_mask_frames, a.freq_masks, a.freq_mask_bins, a.gain_db
        )
    }
}
