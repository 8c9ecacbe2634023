//! Durations on the command line (`500ms`, `1.5s`, `1h30m`, `1d`), read by
//! `humantime`, and in messages.

use std::time::Duration;

use humantime::DurationError;

/// What a duration looks like, at the end of every refusal.
const EXPECTED: &str = "expected a duration like 500ms, 1.5s, 2m, 1h30m or 1d";

/// Parses durations as `humantime` does: numbers, fractions accepted, each followed by
/// a unit (`ns`, `us`, `ms`, `s`, `m`, `h`, `d`, `w`, `M` for months of 30.44 days,
/// `y` for years of 365.25 days, and their longer spellings), optionally separated by
/// spaces: `500ms`, `1.5s`, `1h30m`, `1h 30m 5s`, `1d`. A lone `0` needs no unit.
/// Durations longer than [`holdlock::MAX_DURATION`] (ten years of 365 days) are
/// refused, as the library would refuse them.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    let duration =
        humantime::parse_duration(trimmed).map_err(|error| refusal(text, trimmed, &error))?;
    if duration > holdlock::MAX_DURATION {
        return Err(too_long(text));
    }
    Ok(duration)
}

/// Why `humantime` refused `text` (of which it read `trimmed`), in words.
fn refusal(text: &str, trimmed: &str, error: &DurationError) -> String {
    // The character at a byte offset `humantime` names (always a character boundary).
    let character_at = |at: usize| trimmed.get(at..).and_then(|rest| rest.chars().next());
    let problem = match error {
        DurationError::Empty => "empty duration".to_owned(),
        DurationError::UnknownUnit { unit, .. } if unit.is_empty() => {
            format!("{text:?} has a number without a unit")
        }
        DurationError::UnknownUnit { unit, .. } => {
            format!("{text:?} has the unknown unit {unit:?}")
        }
        DurationError::NumberExpected(at) => match character_at(*at) {
            Some(found) => format!("{text:?} has {found:?} where a number should be"),
            None => format!("{text:?} ends where a number should be"),
        },
        DurationError::InvalidCharacter(at) => match character_at(*at) {
            Some(found) => format!("{text:?} has the unexpected character {found:?}"),
            None => format!("{text:?} ends unexpectedly"),
        },
        // A fraction may be finer than a `Duration` holds, or its number too long.
        DurationError::NumberOverflow if trimmed.contains('.') => {
            format!("{text:?} is too long (at most ten years) or too fine (at most nanoseconds)")
        }
        // Whole numbers overflow only far beyond ten years.
        DurationError::NumberOverflow => return too_long(text),
    };
    format!("{problem}; {EXPECTED}")
}

/// The refusal of a duration longer than [`holdlock::MAX_DURATION`].
fn too_long(text: &str) -> String {
    format!("{text:?} is longer than ten years (3650 days), the longest duration holdlock accepts")
}

/// A `--once-per` period: a duration of at least one second.
pub(crate) fn parse_period(text: &str) -> Result<Duration, String> {
    let period = parse_duration(text)?;
    if period < Duration::from_secs(1) {
        return Err(format!(
            "{text:?} is too short for a period; use at least 1s"
        ));
    }
    Ok(period)
}

/// A short human form: `850ms`, `12.5s`, `2m5s`, `1h30m`.
pub(crate) fn format_duration(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        return format!("{}ms", duration.as_millis());
    }
    if duration < Duration::from_secs(60) {
        let seconds = duration.as_secs_f64();
        return if duration.subsec_millis() == 0 {
            format!("{seconds:.0}s")
        } else {
            format!("{seconds:.1}s")
        };
    }
    let total = duration.as_secs();
    let (hours, minutes, seconds) = (total / 3600, total / 60 % 60, total % 60);
    let mut text = String::new();
    for (value, unit) in [(hours, "h"), (minutes, "m"), (seconds, "s")] {
        if value > 0 {
            text.push_str(&format!("{value}{unit}"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_unit_and_combination() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1h 30m 5s"), Ok(Duration::from_secs(5405)));
        assert_eq!(parse_duration("5 s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("10sec"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration(" 0s "), Ok(Duration::ZERO));
        assert_eq!(
            parse_duration("0"),
            Ok(Duration::ZERO),
            "zero needs no unit"
        );
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
    }

    #[test]
    fn fractions_are_accepted() {
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0.25s"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0.5h"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("1.5d"), Ok(Duration::from_secs(129_600)));
        assert_eq!(parse_duration("2.5ms"), Ok(Duration::from_micros(2500)));
        assert_eq!(parse_duration("1h 0.5m"), Ok(Duration::from_secs(3630)));
    }

    #[test]
    fn bad_durations_are_rejected_with_a_reason() {
        for (bad, reason) in [
            ("", "empty duration"),
            ("   ", "empty duration"),
            ("5", "a number without a unit"),
            ("1h30", "a number without a unit"),
            ("5 parsecs", "the unknown unit \"parsecs\""),
            ("10 lightyears", "the unknown unit \"lightyears\""),
            ("parsecs", "'p' where a number should be"),
            ("s", "'s' where a number should be"),
            ("-1s", "'-' where a number should be"),
            (".5s", "'.' where a number should be"),
            ("1.s", "the unexpected character '.'"),
            ("1,5s", "the unexpected character ','"),
            ("1h30m!", "the unexpected character '!'"),
            ("1.5ns", "too fine"),
            ("0.0000000001s", "too fine"),
        ] {
            let error = parse_duration(bad).expect_err(bad);
            assert!(error.contains(reason), "{bad}: {error}");
            assert!(error.contains("expected a duration"), "{bad}: {error}");
        }
    }

    #[test]
    fn durations_are_at_most_ten_years() {
        assert_eq!(
            parse_duration("3650d"),
            Ok(holdlock::MAX_DURATION),
            "ten years are accepted"
        );
        assert_eq!(parse_duration("9.5y").map(|_| ()), Ok(()));
        for long in [
            "3650d 1ms",
            "3650.5d",
            "10y",
            "4000d",
            "999999999999999999d",
        ] {
            let error = parse_duration(long).expect_err(long);
            assert!(error.contains("ten years"), "{long}: {error}");
        }
    }

    #[test]
    fn periods_are_at_least_a_second() {
        assert_eq!(parse_period("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_period("0s").is_err());
        assert!(parse_period("500ms").is_err());
        assert!(parse_period("soon").is_err());
        assert_eq!(parse_period("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_period("1s"), Ok(Duration::from_secs(1)));
        let error = parse_period("0.9s").expect_err("under a second");
        assert!(error.contains("at least 1s"), "{error}");
        let error = parse_period("4000d").expect_err("over ten years");
        assert!(error.contains("ten years"), "{error}");
    }

    #[test]
    fn durations_format_shortly() {
        assert_eq!(format_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(format_duration(Duration::from_millis(12_500)), "12.5s");
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_secs(125)), "2m5s");
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
    }
}
