//! The options' checks: bad input refused, defaults and the per-call resolution.

use super::*;
use crate::keys::{key_of_channel, release_channel};

#[test]
fn keys_share_one_hash_tag() {
    let names = ClientConfig::default().names("account:42").unwrap();
    assert_eq!(names.key, "holdlock:{account:42}");
    assert_eq!(names.token_key(), "holdlock:{account:42}:token");
    assert_eq!(
        release_channel(&names.key),
        "holdlock:{account:42}:released"
    );
    assert_eq!(key_of_channel("holdlock:{account:42}:released"), names.key);
    let fair = "holdlock:{a:released:b}:fair";
    let channel = crate::keys::hand_off_channel(fair, "c1d2");
    assert_eq!(channel, "holdlock:{a:released:b}:fair:released:c1d2");
    assert_eq!(key_of_channel(&channel), fair);
}

#[test]
fn key_round_trips_to_name() {
    let config = ClientConfig::default();
    assert_eq!(config.name_of_key("holdlock:{a:b}"), Some("a:b"));
    assert_eq!(config.name_of_key("holdlock:{a}:token"), None);
    assert_eq!(config.name_of_key("other:{a}"), None);
}

#[test]
fn bad_names_and_durations_are_rejected() {
    let config = ClientConfig::default();
    assert!(matches!(
        config.names(""),
        Err(LockError::InvalidName { .. })
    ));
    assert!(matches!(
        config.names("a}b"),
        Err(LockError::InvalidName { .. })
    ));
    assert!(lease_millis("lease", Duration::ZERO).is_err());
    assert!(lease_millis("lease", Duration::MAX).is_err());
    assert!(lease_millis("lease", Duration::from_micros(500)).is_err());
    let options = LockOptions::new().wait(Duration::MAX);
    assert!(options.resolve(&config).is_err());
}

#[test]
fn the_fair_wait_is_a_calls_wait_or_the_clients_and_never_zero() {
    let config = ClientConfig::default();
    let untimed = LockOptions::new().resolve(&config).unwrap();
    assert_eq!(untimed.fair_wait_ms, 300_000);
    let timed = LockOptions::new().wait(Duration::from_millis(1_500));
    assert_eq!(timed.resolve(&config).unwrap().fair_wait_ms, 1_500);
    for bad in [Duration::ZERO, Duration::from_micros(999), Duration::MAX] {
        let mut client = ClientConfig {
            fair_wait: bad,
            ..ClientConfig::default()
        };
        let Err(LockError::InvalidOption { option, .. }) = client.validate() else {
            panic!("{bad:?} accepted");
        };
        assert_eq!(option, "fair_wait_timeout");
    }
}

#[test]
fn leases_below_the_minimum_are_rejected() {
    let config = ClientConfig::default();
    for short in [
        Duration::from_millis(3),
        Duration::from_micros(3_990),
        Duration::from_millis(10),
        MIN_LEASE - Duration::from_nanos(1),
    ] {
        let Err(LockError::InvalidOption { option, reason }) =
            LockOptions::new().lease(short).resolve(&config)
        else {
            panic!("{short:?} accepted");
        };
        assert_eq!(option, "lease");
        assert!(reason.contains("minimum of 100ms"), "{reason}");
        let mut client = ClientConfig {
            lease: short,
            ..ClientConfig::default()
        };
        assert!(client.validate().is_err(), "{short:?}");
    }
    let shortest = LockOptions::new().lease(MIN_LEASE).resolve(&config);
    assert_eq!(shortest.unwrap().lease_ms, 100);
}

#[test]
fn leases_are_whole_milliseconds_here_as_in_redis() {
    let client = ClientConfig::default();
    for (given, millis) in [
        (Duration::from_micros(23_900), None), // below the minimum
        (Duration::from_micros(100_999), Some(100)),
        (Duration::from_nanos(123_999_999), Some(123)),
        (Duration::from_secs(30), Some(30_000)),
        (Duration::from_micros(30_000_500), Some(30_000)),
    ] {
        let fixed = LockOptions::new().lease(given).resolve(&client);
        let Some(millis) = millis else {
            assert!(fixed.is_err());
            continue;
        };
        let fixed = fixed.unwrap();
        assert_eq!(fixed.lease_ms, millis, "{given:?}");
        assert_eq!(fixed.lease(), Duration::from_millis(millis), "{given:?}");
        assert!(!fixed.watchdog);

        // A client's lease (the watchdog's) is rounded when the client is built.
        let mut config = ClientConfig {
            lease: given,
            ..ClientConfig::default()
        };
        config.validate().unwrap();
        assert_eq!(config.lease, Duration::from_millis(millis), "{given:?}");
        let renewed = LockOptions::new().resolve(&config).unwrap();
        assert_eq!(renewed.lease_ms, millis);
        assert_eq!(renewed.lease(), Duration::from_millis(millis));
        assert!(renewed.watchdog);
    }
}

#[test]
fn min_replicas_are_checked() {
    let config = ClientConfig::default();
    assert!(MinReplicas::new(0, Duration::from_secs(1)).is_none());
    let resolved = LockOptions::new()
        .min_replicas(2, Duration::from_millis(5))
        .resolve(&config)
        .unwrap();
    assert_eq!(resolved.min_replicas.map(|m| m.replicas), Some(2));
    let off = ClientConfig {
        min_replicas: MinReplicas::new(1, Duration::from_secs(1)),
        ..ClientConfig::default()
    };
    let resolved = LockOptions::new()
        .min_replicas(0, Duration::ZERO)
        .resolve(&off)
        .unwrap();
    assert_eq!(resolved.min_replicas, None, "zero replicas turns it off");
    for bad in [Duration::ZERO, Duration::from_micros(500), Duration::MAX] {
        let options = LockOptions::new().min_replicas(1, bad);
        assert!(matches!(
            options.resolve(&config),
            Err(LockError::InvalidOption {
                option: "min_replicas timeout",
                ..
            })
        ));
    }
}

#[test]
fn scan_pattern_escapes_the_prefix() {
    let config = ClientConfig {
        prefix: "a*b:".into(),
        ..ClientConfig::default()
    };
    assert_eq!(config.scan_pattern("job:*"), "a\\*b:{job:*}");
}

#[test]
fn braces_in_prefix_are_rejected() {
    let mut config = ClientConfig {
        prefix: "{app}:".into(),
        ..ClientConfig::default()
    };
    assert!(config.validate().is_err());
}
