//! Client URLs: which schemes and query parameters are accepted (here), and how a
//! URL is shown without its passwords (`url/redact.rs`).

use ::url::Url;

use crate::error::{LockError, Result};

mod redact;

pub use redact::redact_url;

/// The URL schemes a client accepts, and whether each one means TLS. These are the
/// schemes fred's `Config::from_url` knows, less its Unix-socket ones (`redis+unix`,
/// `valkey+unix`), which need a fred feature this crate does not enable. fred reads
/// any other scheme as `redis://`, and a TLS scheme without a TLS feature as
/// plaintext, so [`check_url`] refuses both before fred sees the URL.
const SCHEMES: [(&str, bool); 12] = [
    ("redis", false),
    ("redis-cluster", false),
    ("redis-sentinel", false),
    ("valkey", false),
    ("valkey-cluster", false),
    ("valkey-sentinel", false),
    ("rediss", true),
    ("rediss-cluster", true),
    ("rediss-sentinel", true),
    ("valkeys", true),
    ("valkeys-cluster", true),
    ("valkeys-sentinel", true),
];

/// Checks the scheme of a client URL before anything connects: it must be one of
/// [`SCHEMES`], and a TLS one only if the crate was built with TLS (`tls_built`, which
/// is `cfg!(feature = "tls-rustls")` outside tests); then that fred reads every query
/// parameter (see [`check_parameters`]).
pub(crate) fn check_url(url: &str, tls_built: bool) -> Result<()> {
    let invalid = |reason: String| LockError::InvalidOption {
        option: "url",
        reason,
    };
    let expected = "expected redis://, rediss://, redis-cluster://, rediss-cluster://, \
                    redis-sentinel://, rediss-sentinel:// or their valkey equivalents";
    let Some(written) = scheme_of(url) else {
        return Err(invalid(format!(
            "the URL has no scheme ({expected}, e.g. redis://127.0.0.1:6379)"
        )));
    };
    // The scheme fred will read: the `url` crate's (lower case), where it parses the URL
    // as written (fred then parses it the same way); else the one written. Messages
    // name the one written.
    let parsed = parse(url);
    let scheme = parsed.as_ref().map_or_else(
        || written.to_ascii_lowercase(),
        |parsed| parsed.scheme().to_owned(),
    );
    let known = SCHEMES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(&scheme));
    match known {
        Some((name, true)) if !tls_built => Err(invalid(format!(
            "`{name}://` needs TLS, and holdlock was built without its `tls-rustls` \
             feature: enable that feature (or use a `redis://` URL to connect without TLS)"
        ))),
        Some(_) => check_parameters(parsed.as_ref(), &scheme)
            .and_then(|()| check_cluster_database(parsed.as_ref(), &scheme))
            .map_err(invalid),
        None if scheme.ends_with("+unix") => Err(invalid(format!(
            "`{written}://`: Unix sockets are not supported (holdlock does not enable \
             fred's `unix-sockets` feature); connect over TCP"
        ))),
        None => Err(invalid(format!("unknown scheme `{written}`; {expected}"))),
    }
}

/// The query parameters fred reads from a cluster URL.
const CLUSTER_PARAMETERS: &[&str] = &["node"];

/// The query parameters fred reads from a Sentinel URL.
const SENTINEL_PARAMETERS: &[&str] = &[
    "sentinelServiceName",
    "sentinelUsername",
    "sentinelPassword",
    "node",
];

/// The query parameters fred reads from a URL of `scheme` (its only ones: fred
/// ignores every other, and these where the scheme does not take them).
fn parameters_read(scheme: &str) -> &'static [&'static str] {
    if scheme.ends_with("-sentinel") {
        SENTINEL_PARAMETERS
    } else if scheme.ends_with("-cluster") {
        CLUSTER_PARAMETERS
    } else {
        &[]
    }
}

/// Why a URL with a fragment is refused.
const FRAGMENT: &str = "the URL has a fragment (`#...`), which fred would ignore (an \
                        unencoded `#` in a password starts it; write it %23)";

/// Why a URL with a parameter fred would ignore, whose name is not shown, is refused.
const UNNAMED_PARAMETER: &str = "the query holds a parameter fred would ignore (not shown: \
                                 an unencoded `?` in a password starts it; write it %3F)";

/// Refuses a query parameter that fred would ignore in a URL of the accepted `scheme`,
/// and a fragment: a misspelt `node` would leave a cluster with one seed, a `?db=2`
/// (as other clients read it) would lock in database 0, where services that write `/2`
/// never look, and a `node` on a `redis://` URL would connect to its host alone. The
/// reason names the parameter, never a value, and not a name that is not a plain word
/// (an unencoded `?` in a password starts the query early). A URL the `url` crate
/// cannot read as written (`parsed` is `None`, see [`parse`]) is left to fred, which
/// refuses it.
fn check_parameters(parsed: Option<&Url>, scheme: &str) -> std::result::Result<(), String> {
    let Some(parsed) = parsed else {
        return Ok(());
    };
    if parsed.fragment().is_some() {
        return Err(FRAGMENT.to_owned());
    }
    let read = parameters_read(scheme);
    let ignored = parsed
        .query_pairs()
        .map(|(name, _)| name)
        .find(|name| !read.contains(&&**name));
    match ignored {
        None => Ok(()),
        Some(name) if !is_plain_word(&name) => Err(UNNAMED_PARAMETER.to_owned()),
        Some(name) => {
            let takes = match read {
                [] => "no query parameters".to_owned(),
                read => read
                    .iter()
                    .map(|name| format!("`{name}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            let hint = parameter_hint(&name, scheme, read);
            Err(format!(
                "fred ignores the parameter `{name}` in this URL: a `{scheme}://` URL takes {takes}{hint}"
            ))
        }
    }
}

/// Refuses a database other than 0 in the path of a cluster URL: a cluster has
/// database 0 only, and fred sends no `SELECT` to a cluster, so a `/2` would lock in
/// database 0, beside the services that wrote `/1` or nothing. The reason shows the
/// path only if it is a number (a misplaced password could be there otherwise).
fn check_cluster_database(parsed: Option<&Url>, scheme: &str) -> std::result::Result<(), String> {
    let Some(parsed) = parsed else {
        return Ok(());
    };
    let path = parsed.path();
    if !scheme.ends_with("-cluster") || matches!(path, "" | "/" | "/0") {
        return Ok(());
    }
    let number = path
        .strip_prefix('/')
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    let shown = match number {
        true => format!("`{path}`"),
        false => "a path".to_owned(),
    };
    Err(format!(
        "the URL names {shown}, but {CLUSTER_DATABASE}: leave the path out, or write /0"
    ))
}

/// Why a cluster takes database 0 only, in both refusals of another.
const CLUSTER_DATABASE: &str = "a cluster has database 0 only (fred selects none on a \
                                cluster, so the locks would be in database 0; Valkey 9's \
                                cluster databases are not supported)";

/// Refuses a fred configuration of a cluster with a database other than 0, which fred
/// would ignore as it ignores a cluster URL's path (see [`check_cluster_database`]).
pub(crate) fn check_cluster_config(config: &fred::types::config::Config) -> Result<()> {
    match config.database {
        Some(database) if database != 0 && config.server.is_clustered() => {
            Err(LockError::InvalidOption {
                option: "config",
                reason: format!(
                    "the configuration names database {database}, but {CLUSTER_DATABASE}"
                ),
            })
        }
        _ => Ok(()),
    }
}

/// Whether a parameter's `name` is a plain word, shown in a refusal.
fn is_plain_word(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// What a refusal of the parameter `name` in a URL of `scheme`, which takes `read`,
/// adds: the parameter meant, where the database goes, or which URLs take it.
fn parameter_hint(name: &str, scheme: &str, read: &[&str]) -> String {
    let base = scheme
        .trim_end_matches("-cluster")
        .trim_end_matches("-sentinel");
    if let Some(meant) = read.iter().find(|known| known.eq_ignore_ascii_case(name)) {
        format!("; did you mean `{meant}`?")
    } else if name.eq_ignore_ascii_case("db") || name.eq_ignore_ascii_case("database") {
        match scheme.ends_with("-cluster") {
            true => "; a cluster has database 0 only".to_owned(),
            false => format!("; the database is the URL's path, e.g. {scheme}://host:6379/2"),
        }
    } else if name == "node" {
        format!("; it is read from `{base}-cluster://` and `{base}-sentinel://` URLs only")
    } else if SENTINEL_PARAMETERS.contains(&name) {
        format!("; it is read from `{base}-sentinel://` URLs only")
    } else {
        String::new()
    }
}

/// `url` as the `url` crate (which fred uses) reads it, if it reads it as written: it
/// accepts it, and `url` holds no ASCII tab or line break, which the crate drops
/// wherever they are (so it would read another URL than the one shown to the user).
fn parse(url: &str) -> Option<Url> {
    if url.contains(['\t', '\n', '\r']) {
        return None;
    }
    Url::parse(url).ok()
}

/// The scheme of `url` as a URL parser reads it (the `url` crate, under fred, first
/// trims leading spaces and control characters); `None` if it has none.
fn scheme_of(url: &str) -> Option<&str> {
    let (scheme, _) = url.trim_start_matches(|c| c <= ' ').split_once(':')?;
    is_scheme(scheme).then_some(scheme)
}

/// Whether `text` is a URL scheme: a letter, then letters, digits, `+`, `-` or `.`.
fn is_scheme(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reason `check_url` gives for `url`, or `None` if it accepts it.
    fn url_refusal(url: &str, tls_built: bool) -> Option<String> {
        match check_url(url, tls_built) {
            Ok(()) => None,
            Err(LockError::InvalidOption {
                option: "url",
                reason,
            }) => Some(reason),
            Err(other) => panic!("{url}: unexpected error {other:?}"),
        }
    }

    #[test]
    fn plaintext_schemes_are_accepted_with_or_without_tls() {
        for tls_built in [false, true] {
            for url in [
                "redis://127.0.0.1:6379",
                "redis://:pw@h:1/0",
                "REDIS://h:1",
                " redis://h:1",
                "redis-cluster://h:1?node=h:2",
                "redis-sentinel://h:26379?sentinelServiceName=m",
                "valkey://h:1",
                "valkey-cluster://h:1",
                "valkey-sentinel://h:1?sentinelServiceName=m",
            ] {
                assert_eq!(url_refusal(url, tls_built), None, "{url}");
            }
        }
    }

    #[test]
    fn tls_schemes_need_the_tls_feature() {
        for url in [
            "rediss://:pw@h:6380",
            "RedisS://h:1",
            "rediss-cluster://h:1?node=h:2",
            "rediss-sentinel://h:1?sentinelServiceName=m",
            "valkeys://h:1",
            "valkeys-cluster://h:1",
            "valkeys-sentinel://h:1?sentinelServiceName=m",
        ] {
            assert_eq!(url_refusal(url, true), None, "{url}");
            let reason = url_refusal(url, false).unwrap_or_else(|| panic!("{url} accepted"));
            assert!(
                reason.contains("tls-rustls") && reason.contains("needs TLS"),
                "{url}: {reason}"
            );
            assert!(!reason.contains("pw"), "{reason}");
        }
    }

    #[test]
    fn unknown_schemes_and_urls_without_one_are_refused() {
        for tls_built in [false, true] {
            for (url, says) in [
                ("foo://127.0.0.1:6379", "unknown scheme `foo`"),
                ("http://127.0.0.1:6379", "unknown scheme `http`"),
                ("https://127.0.0.1:6379", "unknown scheme `https`"),
                ("redis-sentinal://h:1", "unknown scheme `redis-sentinal`"),
                ("redis-clustre://h:1", "unknown scheme `redis-clustre`"),
                ("rediss-foo://h:1", "unknown scheme `rediss-foo`"),
                ("redis+tls://h:1", "unknown scheme `redis+tls`"),
                ("localhost:6379", "unknown scheme `localhost`"),
                (
                    "redis+unix:///tmp/redis.sock",
                    "Unix sockets are not supported",
                ),
                (
                    "valkey+unix:///tmp/redis.sock",
                    "Unix sockets are not supported",
                ),
                ("127.0.0.1:6379", "no scheme"),
                ("//127.0.0.1:6379", "no scheme"),
                ("", "no scheme"),
                ("not a url at all", "no scheme"),
                ("s3cret@h:1", "no scheme"),
                ("re\tdis://h:1", "no scheme"),
                ("://h:1", "no scheme"),
            ] {
                let reason =
                    url_refusal(url, tls_built).unwrap_or_else(|| panic!("{url} accepted"));
                assert!(reason.contains(says), "{url}: {reason}");
                assert!(!reason.contains("s3cret"), "{reason}");
            }
        }
    }

    #[test]
    fn the_query_parameters_fred_reads_are_accepted() {
        for url in [
            "redis://h:1?",
            "redis://h:1/2",
            "redis://h:1/?&",
            "redis-cluster://h:1?node=h:2&node=h:3",
            "valkey-cluster://h:1?node=h:2",
            "redis-cluster://h:1/?node=h:2",
            "valkey-cluster://h:1/0",
            "redis-sentinel://u:p@h:1/0?sentinelServiceName=m&sentinelUsername=su\
             &sentinelPassword=sp&node=h:2",
            "redis-cluster://h:1/0?node=h:2",
            "redis-cluster://h:1/",
            "valkey-cluster://u:p@h:1/0",
        ] {
            assert_eq!(url_refusal(url, false), None, "{url}");
        }
    }

    #[test]
    fn a_cluster_config_with_another_database_is_refused() {
        use fred::types::config::{Config, ServerConfig};
        let config = |server: ServerConfig, database| Config {
            server,
            database,
            ..Config::default()
        };
        let cluster = || ServerConfig::new_clustered(vec![("127.0.0.1", 7000)]);
        let refused = check_cluster_config(&config(cluster(), Some(2)));
        let Err(LockError::InvalidOption { option, reason }) = refused else {
            panic!("accepted: {refused:?}");
        };
        assert_eq!(option, "config");
        assert!(reason.contains("database 2") && reason.contains("database 0 only"));
        assert!(check_cluster_config(&config(cluster(), Some(0))).is_ok());
        assert!(check_cluster_config(&config(cluster(), None)).is_ok());
        let single = ServerConfig::new_centralized("127.0.0.1", 6379);
        assert!(check_cluster_config(&config(single, Some(2))).is_ok());
    }

    #[test]
    fn a_cluster_url_with_another_database_is_refused() {
        for (url, says) in [
            ("redis-cluster://h:1/2?node=h:2", "names `/2`"),
            ("valkey-cluster://u:s3cret@h:1/15", "names `/15`"),
            ("rediss-cluster://h:1/1", "names `/1`"),
            ("redis-cluster://h:1/s3cret", "names a path"),
            ("redis-cluster://h:1/0/1", "names a path"),
        ] {
            let reason = url_refusal(url, true).unwrap_or_else(|| panic!("{url} accepted"));
            assert!(
                reason.contains(says) && reason.contains("database 0 only"),
                "{url}: {reason}"
            );
            assert!(!reason.contains("s3cret"), "{reason}");
        }
    }

    #[test]
    fn query_parameters_fred_would_ignore_are_refused_by_name_only() {
        for (url, says) in [
            (
                "redis://h:1?db=2",
                "the URL's path, e.g. redis://host:6379/2",
            ),
            ("redis://h:1?protocol=resp3", "takes no query parameters"),
            ("redis-cluster://h:1?DB=1", "database 0 only"),
            ("redis-cluster://h:1/2?node=h:2", "names `/2`"),
            ("valkey-cluster://h:1/15", "Valkey 9's cluster databases"),
            ("redis-cluster://h:1/x", "names a path"),
            (
                "redis://h:1?node=h:2",
                "`redis-cluster://` and `redis-sentinel://`",
            ),
            (
                "valkey://h:1?sentinelServiceName=m",
                "`valkey-sentinel://` URLs only",
            ),
            (
                "redis-cluster://h:1?sentinelServiceName=m",
                "`redis-sentinel://` URLs only",
            ),
            (
                "redis-cluster://h:1?node=h:2&nodes=h:3",
                "parameter `nodes`",
            ),
            ("redis-cluster://h:1?Node=h:2", "did you mean `node`?"),
            (
                "redis-sentinel://h:1?sentinelservicename=m",
                "did you mean `sentinelServiceName`?",
            ),
            ("redis://h:1?password=s3cret", "parameter `password`"),
            ("redis://u:?s3cret@h:1", "write it %3F"),
            ("redis://h:1?=s3cret", "not shown"),
            ("redis://u:#s3cret@h:1", "write it %23"),
            ("redis://h:1/0#s3cret", "fragment"),
        ] {
            // With TLS built, a TLS scheme's parameters are checked as well.
            let tls = url
                .replacen("redis", "rediss", 1)
                .replacen("valkey", "valkeys", 1);
            let reason = url_refusal(&tls, true).unwrap_or_else(|| panic!("{tls} accepted"));
            assert!(!reason.contains("s3cret"), "{tls}: {reason}");
            for tls_built in [false, true] {
                let reason =
                    url_refusal(url, tls_built).unwrap_or_else(|| panic!("{url} accepted"));
                assert!(reason.contains(says), "{url}: {reason}");
                assert!(!reason.contains("s3cret"), "{url}: {reason}");
            }
        }
    }

    #[test]
    fn the_scheme_is_the_one_the_url_crate_reads() {
        for tls_built in [false, true] {
            for url in [
                "redis://[::1]:6379",
                "redis://u:p%40w@[::1]:6379/0",
                "Redis-Cluster://h:1?node=h:2",
                "redis://h:1\n",
            ] {
                assert_eq!(url_refusal(url, tls_built), None, "{url}");
            }
        }
        let reason = url_refusal("RedisS://[::1]:6380", false).expect("needs TLS");
        assert!(reason.contains("`rediss://` needs TLS"), "{reason}");
        // Messages name the scheme as written.
        let reason = url_refusal("Redis+Unix:///tmp/redis.sock", false).expect("a socket");
        assert!(reason.contains("`Redis+Unix://`"), "{reason}");
        let reason = url_refusal("HTTP://u:s3cret@[::1]:80", true).expect("http");
        assert!(reason.contains("unknown scheme `HTTP`"), "{reason}");
        assert!(!reason.contains("s3cret"), "{reason}");
        // A scheme the crate reads only once it has dropped a tab is no scheme.
        let reason = url_refusal("re\tdis://h:1", true).expect("a tab");
        assert!(reason.contains("no scheme"), "{reason}");
    }
}
