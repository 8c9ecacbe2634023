//! Durations on the command line (`500ms`, `30s`, `1h30m`, `1d`) and in messages.

use std::time::Duration;

/// The units a duration may use, longest spelling first within each.
const DURATION_UNITS: &[(&str, u128)] = &[
    ("ms", 1),
    ("s", 1_000),
    ("sec", 1_000),
    ("m", 60_000),
    ("min", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// Parses durations like `500ms`, `30s`, `2m`, `1h30m`, `1d`: whole numbers, each
/// followed by a unit (`ms`, `s`, `m`, `h`, `d`), optionally separated by spaces.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    const EXPECTED: &str = "expected a duration like 500ms, 30s, 2m, 1h30m or 1d";
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(format!("empty duration; {EXPECTED}"));
    }
    let mut total_ms: u128 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("{text:?}: {EXPECTED}"));
        }
        let number: u128 = rest[..digits]
            .parse()
            .map_err(|_| format!("{text:?} is too long"))?;
        rest = rest[digits..].trim_start();
        let letters = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = &rest[..letters];
        let Some(&(_, unit_ms)) = DURATION_UNITS.iter().find(|(name, _)| *name == unit) else {
            let problem = if unit.is_empty() {
                "a number without a unit".to_owned()
            } else {
                format!("the unknown unit {unit:?}")
            };
            return Err(format!("{text:?} has {problem}; {EXPECTED}"));
        };
        rest = rest[letters..].trim_start();
        total_ms = number
            .checked_mul(unit_ms)
            .and_then(|piece| total_ms.checked_add(piece))
            .ok_or_else(|| format!("{text:?} is too long"))?;
    }
    let duration = u64::try_from(total_ms)
        .map(Duration::from_millis)
        .map_err(|_| format!("{text:?} is too long"))?;
    if duration > holdlock::MAX_DURATION {
        return Err(format!(
            "{text:?} is longer than ten years, the longest duration holdlock accepts"
        ));
    }
    Ok(duration)
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
        assert_eq!(parse_duration(" 0s "), Ok(Duration::ZERO));
    }

    #[test]
    fn bad_durations_are_rejected_with_a_reason() {
        for bad in [
            "",
            "5",
            "5 parsecs",
            "parsecs",
            "1.5s",
            "-1s",
            "10y",
            "s",
            "1h30",
        ] {
            let error = parse_duration(bad).expect_err(bad);
            assert!(error.contains("expected a duration"), "{bad}: {error}");
        }
        assert!(parse_duration("99999999999999999999999999999999999999999d").is_err());
        assert!(parse_duration("999999999999999999d").is_err());
        assert_eq!(
            parse_duration("3650d"),
            Ok(holdlock::MAX_DURATION),
            "ten years are accepted"
        );
        let error = parse_duration("3650d 1ms").expect_err("beyond ten years");
        assert!(error.contains("ten years"), "{error}");
    }

    #[test]
    fn periods_are_at_least_a_second() {
        assert_eq!(parse_period("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_period("0s").is_err());
        assert!(parse_period("500ms").is_err());
        assert!(parse_period("soon").is_err());
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
