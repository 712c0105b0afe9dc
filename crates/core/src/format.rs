//! Spark-compatible rendering of metric values.
//!
//! Spark's history server and its REST API show SQL metrics as strings produced by
//! `Utils.bytesToString`, `Utils.msDurationToString` and `java.text.NumberFormat`. Clients
//! parse those strings, so qprof reproduces them to the character, including Java's
//! rounding (`%.1f` rounds half-up on the shortest decimal form of the double).

/// Formats an integer with US grouping separators, as `NumberFormat.getIntegerInstance(US)`.
///
/// ```
/// assert_eq!(qprof_core::format::integer(10_000), "10,000");
/// assert_eq!(qprof_core::format::integer(-1_234_567), "-1,234,567");
/// ```
pub fn integer(value: i64) -> String {
    let digits = value.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if value < 0 {
        out.push('-');
    }
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Formats a byte count as Spark's `Utils.bytesToString`: binary units, one decimal,
/// a unit is used from twice its size on (`2047` bytes is `"2047.0 B"`).
///
/// ```
/// assert_eq!(qprof_core::format::bytes(262_144), "256.0 KiB");
/// assert_eq!(qprof_core::format::bytes(0), "0.0 B");
/// ```
pub fn bytes(size: i64) -> String {
    const UNITS: [(&str, u32); 6] = [
        ("EiB", 60),
        ("PiB", 50),
        ("TiB", 40),
        ("GiB", 30),
        ("MiB", 20),
        ("KiB", 10),
    ];
    for (unit, shift) in UNITS {
        let base = 1_i64 << shift;
        if size >= base.saturating_mul(2) {
            return format!("{} {unit}", java_fixed(size as f64 / base as f64, 1));
        }
    }
    format!("{} B", java_fixed(size as f64, 1))
}

/// Formats a duration in milliseconds as Spark's `Utils.msDurationToString`.
///
/// ```
/// assert_eq!(qprof_core::format::millis(44), "44 ms");
/// assert_eq!(qprof_core::format::millis(1_500), "1.5 s");
/// assert_eq!(qprof_core::format::millis(138_000), "2.3 m");
/// ```
pub fn millis(ms: i64) -> String {
    const SECOND: i64 = 1_000;
    const MINUTE: i64 = 60 * SECOND;
    const HOUR: i64 = 60 * MINUTE;
    // Spark divides in single precision (`t.toFloat / second`), which shows in the rounding.
    if ms < SECOND {
        format!("{ms} ms")
    } else if ms < MINUTE {
        format!("{} s", java_fixed(f64::from(ms as f32 / SECOND as f32), 1))
    } else if ms < HOUR {
        format!("{} m", java_fixed(f64::from(ms as f32 / MINUTE as f32), 1))
    } else {
        format!("{} h", java_fixed(f64::from(ms as f32 / HOUR as f32), 2))
    }
}

/// Formats a duration in nanoseconds the way Spark renders `nsTiming` metrics:
/// truncated to whole milliseconds, then as [`millis`].
pub fn nanos(ns: i64) -> String {
    millis(ns / 1_000_000)
}

/// Formats an `average` metric's stored value (the average times ten, Spark's
/// `baseForAvgMetric`) as `NumberFormat.getNumberInstance(US)` does: `22` is `"2.2"`.
pub fn average(stored: i64) -> String {
    let whole = integer(stored / 10);
    let tenth = (stored % 10).unsigned_abs();
    let sign = if stored < 0 && stored > -10 { "-" } else { "" };
    if tenth == 0 {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{tenth}")
    }
}

/// Formats nanoseconds for people: `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s`.
///
/// Not a Spark format; used by qprof's own text output where milliseconds are too coarse.
pub fn human_nanos(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

/// Java's `String.format("%.Nf", v)`: takes the shortest decimal representation of `v`
/// and rounds it half-up to `decimals` fractional digits.
fn java_fixed(value: f64, decimals: usize) -> String {
    let shortest = format!("{}", value.abs());
    let (int_part, frac_part) = shortest.split_once('.').unwrap_or((&shortest, ""));
    let mut digits: Vec<u8> = int_part.bytes().map(|b| b - b'0').collect();
    let int_len = digits.len();
    let frac: Vec<u8> = frac_part.bytes().map(|b| b - b'0').collect();
    for i in 0..decimals {
        digits.push(frac.get(i).copied().unwrap_or(0));
    }
    if frac.get(decimals).is_some_and(|&d| d >= 5) {
        // propagate the carry from the last kept digit
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, 1);
                break;
            }
            i -= 1;
            if digits[i] == 9 {
                digits[i] = 0;
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let int_len = int_len + (digits.len() - int_len - decimals);
    let mut out = String::new();
    if value < 0.0 {
        out.push('-');
    }
    for (i, d) in digits.iter().enumerate() {
        if i == int_len {
            out.push('.');
        }
        out.push(char::from(b'0' + d));
    }
    out
}

/// A camelCase name as lowercase words: `hashBuild` → `hash build`.
pub fn camel_words(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push(' ');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_reads_as_words() {
        assert_eq!(camel_words("hashBuild"), "hash build");
        assert_eq!(camel_words("sortMergeBuffered"), "sort merge buffered");
    }

    #[test]
    fn integers_group_by_thousands() {
        assert_eq!(integer(0), "0");
        assert_eq!(integer(999), "999");
        assert_eq!(integer(1_000), "1,000");
        assert_eq!(integer(123_456_789), "123,456,789");
        assert_eq!(integer(-999), "-999");
        assert_eq!(integer(i64::MIN), "-9,223,372,036,854,775,808");
    }

    #[test]
    fn bytes_match_spark_utils() {
        // cases taken from Spark's own rendering (history server answers)
        assert_eq!(bytes(0), "0.0 B");
        assert_eq!(bytes(80), "80.0 B");
        assert_eq!(bytes(292), "292.0 B");
        assert_eq!(bytes(2047), "2047.0 B");
        assert_eq!(bytes(2048), "2.0 KiB");
        assert_eq!(bytes(262_144), "256.0 KiB");
        assert_eq!(bytes(1024 * 1024 * 1024), "1024.0 MiB");
        assert_eq!(bytes(2 * 1024 * 1024 * 1024), "2.0 GiB");
        // half-up on the shortest decimal form: 2.25 KiB -> 2.3 KiB (Rust's {:.1} gives 2.2)
        assert_eq!(bytes(2304), "2.3 KiB");
        assert_eq!(bytes(i64::MAX), "8.0 EiB");
    }

    #[test]
    fn millis_match_spark_utils() {
        assert_eq!(millis(0), "0 ms");
        assert_eq!(millis(999), "999 ms");
        assert_eq!(millis(1_000), "1.0 s");
        assert_eq!(millis(1_250), "1.3 s");
        // 1.05f is 1.0499999523... as a double: Spark prints 1.0
        assert_eq!(millis(1_050), "1.0 s");
        assert_eq!(millis(59_999), "60.0 s");
        assert_eq!(millis(60_000), "1.0 m");
        assert_eq!(millis(3_600_000), "1.00 h");
        assert_eq!(millis(3_960_000), "1.10 h");
    }

    #[test]
    fn nanos_truncate_to_millis() {
        assert_eq!(nanos(999_999), "0 ms");
        assert_eq!(nanos(44_900_000), "44 ms");
        assert_eq!(nanos(1_500_000_000), "1.5 s");
    }

    #[test]
    fn averages_render_one_decimal() {
        assert_eq!(average(22), "2.2");
        assert_eq!(average(20), "2");
        assert_eq!(average(12_345), "1,234.5");
        assert_eq!(average(0), "0");
    }

    #[test]
    fn human_durations_pick_a_readable_unit() {
        assert_eq!(human_nanos(850), "850 ns");
        assert_eq!(human_nanos(12_340), "12.3 µs");
        assert_eq!(human_nanos(4_560_000), "4.56 ms");
        assert_eq!(human_nanos(1_234_000_000), "1.23 s");
    }

    #[test]
    fn java_rounding_is_half_up_on_shortest_form() {
        assert_eq!(java_fixed(0.25, 1), "0.3");
        assert_eq!(java_fixed(0.35, 1), "0.4");
        assert_eq!(java_fixed(9.96, 1), "10.0");
        assert_eq!(java_fixed(99.95, 1), "100.0");
        assert_eq!(java_fixed(1.0, 2), "1.00");
        assert_eq!(java_fixed(-0.04, 1), "-0.0");
    }
}
