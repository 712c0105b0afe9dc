//! The [`ScaleFactor`] newtype.

use std::fmt;
use std::str::FromStr;

/// A validated TPC-H scale factor: finite, from `0.0001` to `1000`.
///
/// SF 1 is roughly 1 GB of raw data (6 million `lineitem` rows). Parse one
/// from a string with [`str::parse`] (suitable for a clap `value_parser`) or
/// build one with [`ScaleFactor::new`].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct ScaleFactor(f64);

/// Why a string or number is not a valid [`ScaleFactor`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScaleFactorError(String);

impl ScaleFactor {
    /// Largest accepted scale factor.
    pub const MAX: f64 = 1000.0;

    /// Smallest accepted scale factor: the one with a single supplier (the generator
    /// makes 10,000 suppliers per unit and divides by their number).
    pub const MIN: f64 = 0.0001;

    /// Validate `value` as a scale factor.
    pub fn new(value: f64) -> Result<Self, ScaleFactorError> {
        Self::check(value, &value.to_string())
    }

    /// The scale factor as a number.
    pub fn get(self) -> f64 {
        self.0
    }

    /// Directory name conventionally used for a dataset of this scale factor,
    /// e.g. `sf0.1` or `sf1`.
    pub fn dir_name(self) -> String {
        format!("sf{self}")
    }

    fn check(value: f64, shown: &str) -> Result<Self, ScaleFactorError> {
        if !value.is_finite() || value <= 0.0 {
            return Err(ScaleFactorError(format!(
                "scale factor must be a positive number, got '{shown}'"
            )));
        }
        if value < Self::MIN {
            return Err(ScaleFactorError(format!(
                "scale factor must be at least {}, got '{shown}'",
                Self::MIN
            )));
        }
        if value > Self::MAX {
            return Err(ScaleFactorError(format!(
                "scale factor must be at most {}, got '{shown}'",
                Self::MAX
            )));
        }
        Ok(Self(value))
    }
}

impl FromStr for ScaleFactor {
    type Err = ScaleFactorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().parse::<f64>() {
            Ok(value) => Self::check(value, s),
            Err(_) => Err(ScaleFactorError(format!(
                "scale factor must be a positive number, got '{s}'"
            ))),
        }
    }
}

impl fmt::Display for ScaleFactor {
    /// Shortest round-tripping decimal form: `0.1`, `1`, `10`, `0.01`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // f64's Display never uses exponent notation and drops a trailing
        // `.0`, which is exactly the compact form wanted here.
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_valid_values() {
        for (input, value, shown, dir) in [
            ("0.01", 0.01, "0.01", "sf0.01"),
            ("0.1", 0.1, "0.1", "sf0.1"),
            ("1", 1.0, "1", "sf1"),
            ("1.0", 1.0, "1", "sf1"),
            (" 10 ", 10.0, "10", "sf10"),
            ("1e2", 100.0, "100", "sf100"),
            ("1000", 1000.0, "1000", "sf1000"),
        ] {
            let sf: ScaleFactor = input.parse().unwrap();
            assert_eq!(sf.get(), value, "{input}");
            assert_eq!(sf.to_string(), shown, "{input}");
            assert_eq!(sf.dir_name(), dir, "{input}");
        }
    }

    #[test]
    fn rejects_bad_values() {
        for input in [
            "", "abc", "-1", "0", "0.0", "-0", "NaN", "nan", "inf", "-inf", "1000.5", "1e9", "1,5",
            "0.00009", "1e-5",
        ] {
            let err = input.parse::<ScaleFactor>().unwrap_err().to_string();
            assert!(
                err.starts_with("scale factor must be"),
                "{input:?}: unexpected message {err:?}"
            );
            assert!(err.contains(&format!("'{input}'")), "{input:?}: {err:?}");
            assert!(!err.contains('\n'));
            let message = err.split(", got").next().unwrap();
            assert_eq!(message, message.to_lowercase(), "{err}");
        }
        assert_eq!(
            "-1".parse::<ScaleFactor>().unwrap_err().to_string(),
            "scale factor must be a positive number, got '-1'"
        );
        assert_eq!(
            "5000".parse::<ScaleFactor>().unwrap_err().to_string(),
            "scale factor must be at most 1000, got '5000'"
        );
    }

    #[test]
    fn new_validates_too() {
        assert!(ScaleFactor::new(0.5).is_ok());
        assert!(ScaleFactor::new(f64::NAN).is_err());
        assert!(ScaleFactor::new(f64::INFINITY).is_err());
        assert!(ScaleFactor::new(0.0).is_err());
        assert!(ScaleFactor::new(1001.0).is_err());
        assert!(ScaleFactor::new(ScaleFactor::MIN).is_ok());
        assert!(ScaleFactor::new(ScaleFactor::MIN / 2.0).is_err());
    }
}
