//! Timestamps as the audit log, the lockfile and transcripts write them:
//! RFC 3339 in UTC, to the second (`2026-11-22T10:00:01Z`). One helper, so
//! every file capstan writes spells time the same way.

use std::time::SystemTime;

/// `time` as RFC 3339 in UTC, to the second: `2026-11-22T10:00:01Z`.
pub fn rfc3339(time: SystemTime) -> String {
    let secs = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `time` as RFC 3339 in UTC, to the microsecond:
/// `2026-11-22T10:00:01.000042Z` (as log lines have it).
pub fn rfc3339_micros(time: SystemTime) -> String {
    let since = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let mut text = rfc3339(time);
    text.pop();
    text.push_str(&format!(".{:06}Z", since.subsec_micros()));
    text
}

/// The proleptic Gregorian date of a count of days since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shift to an era that starts on 0000-03-01, so leap days end a year.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153; // 0 = March
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The current time as RFC 3339 in UTC, to the second.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc3339_utc() {
        let at = |secs| rfc3339(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(at(1_795_341_601), "2026-11-22T10:00:01Z");
        assert_eq!(at(4_107_542_399), "2100-02-28T23:59:59Z");
        let micros =
            SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_700_000_000_000_007);
        assert_eq!(rfc3339_micros(micros), "2023-11-14T22:13:20.000007Z");
    }
}
