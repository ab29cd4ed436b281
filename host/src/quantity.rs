//! Sizes and durations, written one way wherever capstan reads them: a
//! plugin's `[limits]`, the lockfile, the user config
//! (`[model] response_timeout`) and the command line (`--memory`,
//! `--timeout`).
//!
//! - A **size** is a whole number of bytes, alone or with a unit: `B`,
//!   `KiB`, `MiB` or `GiB` (powers of 1024; any case, a space before the
//!   unit allowed): `4096`, `512KiB`, `256MiB`, `1 GiB`. Decimal units
//!   (`MB`) and bare letters (`M`) are refused, since they would mean
//!   1,000,000 to some readers and 1,048,576 to others. In TOML a size may
//!   also be an integer of bytes.
//! - A **duration** is a whole number with a unit: `ms`, `s` or `m`
//!   (minutes): `500ms`, `30s`, `2m`. A bare number is refused, since it
//!   could be seconds or milliseconds.
//!
//! What range is acceptable is the reader's to say (a plugin may ask for at
//! most 4GiB and 10m); this module only reads and writes the spelling.

use std::fmt;
use std::time::Duration;

/// The size units, smallest first, with their factors.
const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
];

/// The duration units, smallest first, with their length in milliseconds.
const DURATION_UNITS: &[(&str, u64)] = &[("ms", 1), ("s", 1000), ("m", 60_000)];

/// Splits `256MiB` into its digits and its unit (trimmed; maybe empty).
fn number_and_unit(text: &str) -> (&str, &str) {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    (number, unit.trim())
}

/// Parses a size (see the module's grammar) into bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let (number, unit) = number_and_unit(text);
    if number.is_empty() {
        return Err(format!(
            "\"{text}\" is not a size; write a whole number of bytes, or one with KiB, MiB or GiB, such as \"256MiB\""
        ));
    }
    let factor = if unit.is_empty() {
        1
    } else {
        match SIZE_UNITS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(unit))
        {
            Some((_, factor)) => *factor,
            None => return Err(size_unit_error(text, number, unit)),
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .ok_or_else(|| format!("\"{text}\" is too large a size"))
}

/// Why `unit` is not a size unit, suggesting the binary one it may mean.
fn size_unit_error(text: &str, number: &str, unit: &str) -> String {
    let binary = match unit.to_ascii_lowercase().as_str() {
        "k" | "kb" => Some("KiB"),
        "m" | "mb" => Some("MiB"),
        "g" | "gb" => Some("GiB"),
        _ => None,
    };
    match binary {
        Some(binary) => format!(
            "\"{text}\" has unit `{unit}`, which is ambiguous; write \"{number}{binary}\" (sizes count in KiB, MiB and GiB, powers of 1024)"
        ),
        _ => format!(
            "\"{text}\" has unit `{unit}`; write a whole number of bytes, or one with KiB, MiB or GiB, such as \"256MiB\""
        ),
    }
}

/// Parses a duration (see the module's grammar).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = number_and_unit(text);
    if number.is_empty() {
        return Err(format!(
            "\"{text}\" is not a duration; write a whole number with ms, s or m, such as \"30s\""
        ));
    }
    if unit.is_empty() {
        return Err(format!(
            "\"{text}\" has no unit; write \"{number}s\", \"{number}ms\" or \"{number}m\""
        ));
    }
    let Some((_, millis)) = DURATION_UNITS.iter().find(|(name, _)| *name == unit) else {
        return Err(format!(
            "\"{text}\" has unit `{unit}`; use ms, s or m, such as \"30s\""
        ));
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(*millis))
        .map(Duration::from_millis)
        .ok_or_else(|| format!("\"{text}\" is too long a duration"))
}

/// A size in its shortest exact spelling: `256MiB`, `1000B`.
pub fn format_size(bytes: u64) -> String {
    let (unit, factor) = SIZE_UNITS
        .iter()
        .rev()
        .find(|(_, factor)| bytes != 0 && bytes.is_multiple_of(*factor))
        .copied()
        .unwrap_or(("B", 1));
    format!("{}{unit}", bytes / factor)
}

/// A duration in its shortest exact spelling, to the millisecond: `2m`,
/// `30s`, `1500ms`.
pub fn format_duration(duration: Duration) -> String {
    let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    let (unit, factor) = DURATION_UNITS
        .iter()
        .rev()
        .find(|(_, factor)| millis != 0 && millis.is_multiple_of(*factor))
        .copied()
        .unwrap_or(("ms", 1));
    format!("{}{unit}", millis / factor)
}

/// A size in bytes, read and written in the grammar above; in TOML, an
/// integer of bytes is read too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_size(self.0))
    }
}

impl serde::Serialize for Size {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl serde::de::Visitor<'_> for Visitor {
            type Value = Size;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"256MiB\"")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Size, E> {
                parse_size(text).map(Size).map_err(E::custom)
            }

            fn visit_u64<E: serde::de::Error>(self, bytes: u64) -> Result<Size, E> {
                Ok(Size(bytes))
            }

            fn visit_i64<E: serde::de::Error>(self, bytes: i64) -> Result<Size, E> {
                u64::try_from(bytes).map(Size).map_err(|_| {
                    E::custom(format!("{bytes} is not a size; a size is not negative"))
                })
            }
        }

        deserializer.deserialize_any(Visitor)
    }
}

/// A duration, read and written in the grammar above.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct TimeSpan(pub Duration);

impl fmt::Display for TimeSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

impl serde::Serialize for TimeSpan {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for TimeSpan {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl serde::de::Visitor<'_> for Visitor {
            type Value = TimeSpan;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"30s\"")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<TimeSpan, E> {
                parse_duration(text).map(TimeSpan).map_err(E::custom)
            }
        }

        deserializer.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bytes_or_binary_units() {
        for (text, bytes) in [
            ("4096", 4096),
            ("0", 0),
            ("1B", 1),
            ("512KiB", 512 << 10),
            ("256MiB", 256 << 20),
            ("256mib", 256 << 20),
            ("1 GiB", 1 << 30),
            (" 4GiB ", 4 << 30),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        for (text, says) in [
            ("64M", "write \"64MiB\""),
            ("12MB", "write \"12MiB\""),
            ("1gb", "write \"1GiB\""),
            ("1.5GiB", "unit `.5GiB`"),
            ("MiB", "not a size"),
            ("", "not a size"),
            ("-1", "not a size"),
            ("lots", "not a size"),
            ("12 parsecs", "unit `parsecs`"),
            ("99999999999999999999GiB", "too large"),
        ] {
            let err = parse_size(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration(" 1 s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        for (text, says) in [
            ("7", "write \"7s\", \"7ms\" or \"7m\""),
            ("1h", "use ms, s or m"),
            ("30S", "use ms, s or m"),
            ("1.5s", "use ms, s or m"),
            ("soon", "not a duration"),
            ("", "not a duration"),
            ("99999999999999999999m", "too long"),
        ] {
            let err = parse_duration(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn spellings_round_trip() {
        for bytes in [1, 1000, 1024, 4096, 128 << 20, 3 << 30, (1 << 20) + 1] {
            assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }
        assert_eq!(format_size(128 << 20), "128MiB");
        assert_eq!(format_size(1000), "1000B");
        for millis in [1, 500, 1000, 1500, 60_000, 600_000] {
            let duration = Duration::from_millis(millis);
            assert_eq!(parse_duration(&format_duration(duration)), Ok(duration));
        }
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Limits {
        memory: Size,
        timeout: TimeSpan,
    }

    #[test]
    fn toml_reads_and_writes_the_same_spellings() {
        let read: Limits = toml::from_str("memory = \"64MiB\"\ntimeout = \"2m\"\n").unwrap();
        assert_eq!(read.memory, Size(64 << 20));
        assert_eq!(read.timeout, TimeSpan(Duration::from_secs(120)));
        let written = toml::to_string(&read).unwrap();
        assert_eq!(written, "memory = \"64MiB\"\ntimeout = \"2m\"\n");
        let bytes: Limits = toml::from_str("memory = 1_048_576\ntimeout = \"1s\"\n").unwrap();
        assert_eq!(bytes.memory, Size(1 << 20));
        let err = toml::from_str::<Limits>("memory = \"1MB\"\ntimeout = \"1s\"\n").unwrap_err();
        assert!(err.message().contains("\"1MiB\""), "{err}");
        let err = toml::from_str::<Limits>("memory = 1\ntimeout = 20\n").unwrap_err();
        assert!(err.message().contains("a duration such as"), "{err}");
    }
}
