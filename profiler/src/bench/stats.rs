//! Summary statistics of repeated measurements: minimum, median, maximum and spread.
//!
//! Every benchmark repeats its measurement a fixed number of times and keeps one sample per
//! repetition (microseconds per operation, or operations per second). The table reports the
//! minimum (the least disturbed repetition, what lmbench prints), the median (the typical one,
//! what `bench diff` compares) and the spread, `maximum - minimum`, so a noisy row is visible.

use serde::{Deserialize, Serialize};

/// Minimum, median, maximum and spread of a set of samples, in the samples' unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Summary {
    /// The smallest sample.
    pub min: f64,
    /// The middle sample; with an even count, the mean of the two middle samples.
    pub median: f64,
    /// The largest sample.
    pub max: f64,
    /// `max - min`: how far apart the repetitions were (0 when they all agree).
    pub spread: f64,
}

impl Summary {
    /// Summarizes `samples`; `None` when there are none or one of them is not a finite number
    /// (NaN or infinity would make "smallest" and "middle" meaningless).
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|sample| !sample.is_finite()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let count = sorted.len();
        let median = if count % 2 == 1 {
            sorted[count / 2]
        } else {
            (sorted[count / 2 - 1] + sorted[count / 2]) / 2.0
        };
        let min = sorted[0];
        let max = sorted[count - 1];
        Some(Summary {
            min,
            median,
            max,
            spread: max - min,
        })
    }

    /// The spread as a percentage of the median (0 when the median is 0).
    pub fn spread_percent(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            self.spread / self.median * 100.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Summary;

    /// The median of an odd count is the middle sample, whatever the input order.
    #[test]
    fn odd_count() {
        let summary = Summary::of(&[5.0, 1.0, 3.0]).expect("finite samples");
        assert_eq!(summary.min, 1.0);
        assert_eq!(summary.median, 3.0);
        assert_eq!(summary.max, 5.0);
        assert_eq!(summary.spread, 4.0);
    }

    /// The median of an even count is the mean of the two middle samples.
    #[test]
    fn even_count() {
        let summary = Summary::of(&[4.0, 1.0, 2.0, 10.0]).expect("finite samples");
        assert_eq!(summary.median, 3.0);
        assert_eq!(summary.spread, 9.0);
        assert_eq!(summary.spread_percent(), 300.0);
    }

    /// No samples, or a non-finite one, give no summary instead of a nonsense one.
    #[test]
    fn empty_and_nan() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
    }
}
