//! The span a query runs under, in W3C Trace Context's `traceparent` form
//! (`00-<trace id>-<parent span id>-<flags>`), so that a query's trace is a child of the
//! request that ran it.

use std::fmt;
use std::str::FromStr;

/// A parent span from another process or library: its trace, its span and its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// The trace's id (never all zero).
    pub trace_id: [u8; 16],
    /// The parent span's id (never all zero).
    pub span_id: [u8; 8],
    /// Trace flags; bit 0 is "sampled".
    pub flags: u8,
}

/// Why a `traceparent` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("traceparent {value:?} is not `00-<32 hex>-<16 hex>-<2 hex>`: {reason}")]
pub struct TraceParentError {
    /// The value refused.
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl TraceParent {
    /// Whether the parent was sampled (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }
}

fn hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl FromStr for TraceParent {
    type Err = TraceParentError;

    fn from_str(value: &str) -> Result<TraceParent, TraceParentError> {
        let refuse = |reason| TraceParentError {
            value: value.to_string(),
            reason,
        };
        let parts: Vec<&str> = value.trim().split('-').collect();
        let [version, trace, span, flags] = parts[..] else {
            return Err(refuse("it does not have four dash-separated fields"));
        };
        // version ff is invalid; later versions may append fields, version 00 may not
        match hex::<1>(version) {
            Some([0xff]) | None => {
                return Err(refuse("its version is not two hex digits below ff"));
            }
            Some(_) => {}
        }
        let trace_id =
            hex::<16>(trace).ok_or_else(|| refuse("its trace id is not 32 hex digits"))?;
        let span_id = hex::<8>(span).ok_or_else(|| refuse("its span id is not 16 hex digits"))?;
        let [flags] = hex::<1>(flags).ok_or_else(|| refuse("its flags are not two hex digits"))?;
        if trace_id == [0; 16] {
            return Err(refuse("its trace id is all zero"));
        }
        if span_id == [0; 8] {
            return Err(refuse("its span id is all zero"));
        }
        Ok(TraceParent {
            trace_id,
            span_id,
            flags,
        })
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("00-")?;
        for b in self.trace_id {
            write!(f, "{b:02x}")?;
        }
        f.write_str("-")?;
        for b in self.span_id {
            write!(f, "{b:02x}")?;
        }
        write!(f, "-{:02x}", self.flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_specifications_example_round_trips() {
        let parent: TraceParent = SAMPLE.parse().unwrap();
        assert_eq!(parent.trace_id[0], 0x4b);
        assert_eq!(parent.span_id[7], 0xb7);
        assert!(parent.sampled());
        assert_eq!(parent.to_string(), SAMPLE);
    }

    #[test]
    fn malformed_values_are_refused_with_the_reason() {
        for (value, reason) in [
            ("", "four"),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                "four",
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "version",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
                "trace id",
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "all zero",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "all zero",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
                "span id",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
                "flags",
            ),
        ] {
            let error = value.parse::<TraceParent>().unwrap_err();
            assert!(error.to_string().contains(reason), "{value}: {error}");
        }
    }
}
