//! Which rows a sink has received: the bookkeeping both sinks share, so that an output
//! is committed only with every row written exactly once and nothing beyond.

use std::sync::Arc;

use mel_core::{AdjustmentCounts, ClipMeta, MelPlan, SourceInfo};

/// Labels, paths, sources and metadata of the rows received so far.
#[derive(Debug)]
pub(crate) struct RowLedger {
    labels: Vec<Option<i64>>,
    paths: Vec<Option<String>>,
    sources: Vec<SourceInfo>,
    metas: Vec<Arc<[String]>>,
    meta_columns: usize,
}

impl RowLedger {
    /// A ledger for at most `rows` rows, each with `meta_columns` metadata values.
    pub(crate) fn new(rows: usize, meta_columns: usize) -> Self {
        RowLedger {
            labels: vec![None; rows],
            paths: vec![None; rows],
            sources: vec![SourceInfo::default(); rows],
            metas: vec![Arc::from([]); rows],
            meta_columns,
        }
    }

    /// Rows planned.
    pub(crate) fn capacity(&self) -> usize {
        self.labels.len()
    }

    /// Records rows `first_row..` described by `meta`; refuses rows beyond the plan or
    /// written before (nothing is recorded then).
    pub(crate) fn record(&mut self, first_row: usize, meta: &[ClipMeta]) -> Result<(), String> {
        let end = first_row + meta.len();
        if end > self.labels.len() {
            return Err(format!(
                "rows {first_row}..{end} exceed the {} planned",
                self.labels.len()
            ));
        }
        if let Some(i) = self.labels[first_row..end].iter().position(Option::is_some) {
            return Err(format!("row {} written twice", first_row + i));
        }
        if let Some(m) = meta.iter().find(|m| m.meta.len() != self.meta_columns) {
            return Err(format!(
                "{} has {} metadata values for {} columns",
                m.path,
                m.meta.len(),
                self.meta_columns
            ));
        }
        for (i, m) in meta.iter().enumerate() {
            self.labels[first_row + i] = Some(m.label);
            self.paths[first_row + i] = Some(m.path.clone());
            self.sources[first_row + i] = m.source;
            self.metas[first_row + i] = m.meta.clone();
        }
        Ok(())
    }

    /// Checks that rows `0..rows` were each written and none beyond.
    pub(crate) fn check(&self, rows: usize) -> Result<(), String> {
        if rows > self.labels.len() {
            return Err(format!(
                "commit of {rows} rows, but only {} were planned",
                self.labels.len()
            ));
        }
        if let Some(missing) = self.labels[..rows].iter().position(Option::is_none) {
            return Err(format!(
                "{} of {rows} rows were never written (first: row {missing}); the output was not committed",
                self.labels[..rows].iter().filter(|l| l.is_none()).count()
            ));
        }
        if let Some(extra) = self.labels[rows..].iter().position(Option::is_some) {
            return Err(format!(
                "row {} was written but the output holds {rows} rows; the output was not committed",
                rows + extra
            ));
        }
        Ok(())
    }

    /// Labels of rows `0..rows` (after [`check`](Self::check)).
    pub(crate) fn labels(&self, rows: usize) -> Vec<i64> {
        self.labels[..rows]
            .iter()
            .map(|l| l.unwrap_or(-1))
            .collect()
    }

    /// Sources of rows `0..rows`.
    pub(crate) fn sources(&self, rows: usize) -> &[SourceInfo] {
        &self.sources[..rows]
    }

    /// How many of the clips in rows `0..rows` were resampled, downmixed, padded or
    /// trimmed: a count per row, or for files read whole (whole clips, windows) per file.
    pub(crate) fn provenance(&self, rows: usize, plan: &MelPlan) -> AdjustmentCounts {
        let (rate, sources) = (plan.sample_rate(), self.sources(rows));
        if plan.cutting().is_none() {
            return AdjustmentCounts::of(sources, rate, plan.clip_samples());
        }
        // Files read whole: counted once each (their first row). A whole clip is never
        // padded or trimmed; windows end with a padded one when audio is left over.
        let mut counts = AdjustmentCounts::default();
        for r in (0..rows).filter(|&r| r == 0 || self.paths[r] != self.paths[r - 1]) {
            let s = &sources[r];
            counts.resampled += usize::from(s.resampled(rate));
            counts.downmixed += usize::from(s.downmixed());
            if let Some(w) = plan.windows() {
                let n = (s.frames as u128 * rate as u128).div_ceil(s.rate.max(1) as u128) as u64;
                let last_end = (w.count(n) - 1) * w.hop as u64 + w.window as u64;
                counts.padded += usize::from(last_end > n);
            }
        }
        counts
    }

    /// Column `column`'s value for each of rows `0..rows` (after [`check`](Self::check)).
    pub(crate) fn meta_column(&self, column: usize, rows: usize) -> Vec<&str> {
        self.metas[..rows]
            .iter()
            .map(|m| m.get(column).map_or("", String::as_str))
            .collect()
    }

    /// Paths of rows `0..rows` (after [`check`](Self::check)).
    pub(crate) fn paths(&self, rows: usize) -> Vec<&str> {
        self.paths[..rows]
            .iter()
            .map(|p| p.as_deref().unwrap_or(""))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(n: usize) -> Vec<ClipMeta> {
        (0..n)
            .map(|i| ClipMeta {
                index: i,
                source: SourceInfo::default(),
                label: i as i64,
                path: format!("{i}.wav"),
                meta: Arc::from([format!("spk{}", i % 2)]),
            })
            .collect()
    }

    #[test]
    fn twice_beyond_missing_and_extra_rows_are_refused() {
        let mut l = RowLedger::new(5, 1);
        let mut wrong = meta(1);
        wrong[0].meta = Arc::from([]);
        assert!(
            l.record(0, &wrong)
                .unwrap_err()
                .contains("0 metadata values for 1 columns")
        );
        l.record(0, &meta(2)).unwrap();
        assert!(
            l.record(1, &meta(1))
                .unwrap_err()
                .contains("row 1 written twice")
        );
        assert!(l.record(4, &meta(2)).unwrap_err().contains("exceed"));
        assert!(
            l.check(3)
                .unwrap_err()
                .contains("1 of 3 rows were never written")
        );
        l.record(3, &meta(1)).unwrap();
        assert!(l.check(2).unwrap_err().contains("row 3 was written"));
        l.record(2, &meta(1)).unwrap();
        l.check(4).unwrap();
        assert_eq!(l.labels(4), [0, 1, 0, 0]);
        assert_eq!(l.paths(2), ["0.wav", "1.wav"]);
        assert_eq!(l.meta_column(0, 2), ["spk0", "spk1"]);
        assert!(l.check(6).is_err());
    }
}
