//! Client URLs: which schemes and query parameters are accepted, and how a URL is
//! shown without its passwords.

use std::ops::Range;

use ::url::Url;

use crate::error::{LockError, Result};

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
        Some(_) => check_parameters(parsed.as_ref(), &scheme).map_err(invalid),
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

/// `url` with the passwords in it replaced by `***`: how this crate shows a URL in
/// `Debug` output, and how to put one in a log or an error message of your own.
///
/// Hidden are the password of the user information (`user:password@host`, the user
/// name is kept) and the value of every query parameter whose name contains
/// `password` in any case, percent-encoded or not (fred's `sentinelPassword`). In a
/// well-formed URL (one the `url` crate, which fred uses, parses as written, its user
/// information percent-encoded) the password is the one that crate reads. Otherwise
/// an unencoded `/`, `?` or `#` in a password makes the end of the user information
/// ambiguous: when an `@` follows any of them, everything from `://` (or from the
/// start, without a scheme) to the last `@` is hidden, user name and host included,
/// so that no password shows whatever characters it holds. A parameter value runs to
/// the next `&`; following parts without a `=` are taken as more of the password.
///
/// # Examples
/// ```
/// assert_eq!(
///     holdlock::redact_url("redis://app:s3cret@10.0.0.7:6379/0"),
///     "redis://app:***@10.0.0.7:6379/0"
/// );
/// // Is `/ss@10.0.0.7:6379` a path, or part of the password? Either way, it is hidden.
/// assert_eq!(
///     holdlock::redact_url("redis://app:s3/ss@10.0.0.7:6379"),
///     "redis://***@10.0.0.7:6379"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let mut hidden = Vec::new();
    hide_password_parameters(url, &mut hidden);
    match parsed_password(url) {
        Some(password) => hidden.extend(password),
        None => hide_userinfo_password(url, &mut hidden),
    }
    hidden.sort_by_key(|range| range.start);
    let mut merged: Hidden = Vec::with_capacity(hidden.len());
    for range in hidden {
        match merged.last_mut() {
            // Overlapping or touching ranges show as one `***`.
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    let mut redacted = String::with_capacity(url.len());
    let mut shown_from = 0;
    for range in merged {
        redacted.push_str(&url[shown_from..range.start]);
        redacted.push_str("***");
        shown_from = range.end;
    }
    redacted.push_str(&url[shown_from..]);
    redacted
}

/// Byte ranges of `url` that [`redact_url`] replaces; every bound is at an ASCII
/// character or an end of `url`, so on a character boundary.
type Hidden = Vec<Range<usize>>;

/// Where the password of `url`'s user information is, as the `url` crate reads it:
/// `Some(None)` if there is none, `None` if `url` is not well-formed, and the password
/// is left to [`hide_userinfo_password`]. Well-formed is: [`parse`] reads it, it has
/// an authority (`<scheme>://`), every `@` is in that authority (an `@` after it may
/// belong to a password holding an unencoded `/`, `?` or `#`, which the crate reads
/// as the start of a path, query or fragment), and its user information is written
/// exactly as the crate writes it back: every character the crate would
/// percent-encode (a second `:`, an `@`, a space, any non-ASCII character, ...) is
/// encoded already, so the crate's user name and password are the text of `url`.
fn parsed_password(url: &str) -> Option<Option<Range<usize>>> {
    let parsed = parse(url)?;
    let start = url
        .find("://")
        .filter(|&at| is_scheme(url[..at].trim_start_matches(|c| c <= ' ')))?
        + 3;
    let rest = &url[start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if rest[authority_end..].contains('@') {
        return None;
    }
    let userinfo = rest[..authority_end]
        .rfind('@')
        .map_or("", |at| &rest[..at]);
    let (username, password) = (parsed.username(), parsed.password());
    let written = match password {
        Some(password) => userinfo.strip_prefix(username)?.strip_prefix(':')? == password,
        None => userinfo == username,
    };
    if !written {
        return None;
    }
    let password_start = start + username.len() + 1;
    Some(password.map(|password| password_start..password_start + password.len()))
}

/// Hides the password of the user information: the part after its first `:`, or,
/// where the user information cannot be told apart from what follows it, all of it.
fn hide_userinfo_password(url: &str, hidden: &mut Hidden) {
    // After `<scheme>://`, or from the start if the URL does not begin with a scheme.
    let start = url
        .find("://")
        .filter(|&at| is_scheme(url[..at].trim_start_matches(|c| c <= ' ')))
        .map_or(0, |at| at + 3);
    let rest = &url[start..];
    let Some(at) = rest.rfind('@') else {
        return; // no user information
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if at < authority_end {
        // Every `@` is in the authority, so the last one ends the user information
        // (as the `url` crate under fred reads it); the first `:` ends the user name.
        if let Some(colon) = rest[..at].find(':') {
            hidden.push(start + colon + 1..start + at);
        }
    } else {
        // An `@` after a `/`, `?` or `#`: any of them may be part of the password.
        hidden.push(start..start + at);
    }
}

/// Hides the value of every query parameter whose name contains `password`. Any `?`
/// or `&` may start a parameter (a `?` in a password of the user information may be
/// taken for the start of the query), and a value runs to the next `&`, taking in
/// following parts without a `=` (an unencoded `&` in the password).
fn hide_password_parameters(url: &str, hidden: &mut Hidden) {
    for (at, _) in url.match_indices(['?', '&']) {
        let param_start = at + 1;
        let param_end = url[param_start..]
            .find('&')
            .map_or(url.len(), |end| param_start + end);
        let Some((name, _)) = url[param_start..param_end].split_once('=') else {
            continue;
        };
        if !percent_decoded(name).to_lowercase().contains("password") {
            continue;
        }
        let value_start = param_start + name.len() + 1;
        let mut value_end = param_end;
        while value_end < url.len() {
            let next_start = value_end + 1;
            let next_end = url[next_start..]
                .find('&')
                .map_or(url.len(), |end| next_start + end);
            if url[next_start..next_end].contains('=') {
                break;
            }
            value_end = next_end;
        }
        if value_start < value_end {
            hidden.push(value_start..value_end);
        }
    }
}

/// `text` with `%XX` escapes decoded and `+` read as a space, as in a query.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (bytes[i], escaped) {
            (_, Some(byte)) => {
                decoded.push(byte);
                i += 3;
            }
            (b'+', None) => {
                decoded.push(b' ');
                i += 1;
            }
            (byte, None) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reason `check_url` gives for `url`, or `None` if it accepts it.
    /// URLs whose passwords hold characters that delimit parts of a URL, with the
    /// password(s) in each, and how they show.
    const TRICKY_URLS: [(&str, &[&str], &str); 27] = [
        // `/`, `?`, `#` in the password: the user information cannot be delimited.
        (
            "redis://user:pa/ss@host:6379",
            &["pa/ss"],
            "redis://***@host:6379",
        ),
        ("redis://:p?w@h:1", &["p?w"], "redis://***@h:1"),
        ("redis://:p#w@h:1", &["p#w"], "redis://***@h:1"),
        ("redis://u:a/b?c#d@h:1/0", &["a/b?c#d"], "redis://***@h:1/0"),
        ("redis://:p?x=1@h:1", &["p?x=1"], "redis://***@h:1"),
        ("redis://:p/w@h:1/0?x=1", &["p/w"], "redis://***@h:1/0?x=1"),
        // `@` and `:` in the password: the last `@` and the first `:` delimit it.
        ("redis://:p@w@h:1", &["p@w"], "redis://:***@h:1"),
        ("redis://u:p:w@h:1", &["p:w"], "redis://u:***@h:1"),
        ("redis://u:@:@@h:1/0", &["@:@"], "redis://u:***@h:1/0"),
        // Percent-encoded passwords.
        (
            "redis://u:p%2Fw%40x@h:1",
            &["p%2Fw%40x"],
            "redis://u:***@h:1",
        ),
        ("redis://u:%3F%23@h:1", &["%3F%23"], "redis://u:***@h:1"),
        // A user name alone is not hidden; one holding a `/` cannot be delimited.
        ("redis://app@h:1/0", &[], "redis://app@h:1/0"),
        ("redis://a/pp@h:1", &[], "redis://***@h:1"),
        // Sentinel URLs with both passwords.
        (
            "redis-sentinel://u:pw1@h:26379/0?sentinelServiceName=m&sentinelUsername=su&sentinelPassword=pw2",
            &["pw1", "pw2"],
            "redis-sentinel://u:***@h:26379/0?sentinelServiceName=m&sentinelUsername=su&sentinelPassword=***",
        ),
        (
            "redis-sentinel://u:p/1@h:1?sentinelServiceName=m&sentinelPassword=p@2&node=h:2",
            &["p/1", "p@2"],
            "redis-sentinel://***&node=h:2",
        ),
        (
            "redis-sentinel://h:1?sentinelPassword=a#b&node=h:2",
            &["a#b"],
            "redis-sentinel://h:1?sentinelPassword=***&node=h:2",
        ),
        (
            "redis-sentinel://h:1?sentinelPassword=a&b&&c&node=h:2",
            &["a&b&&c"],
            "redis-sentinel://h:1?sentinelPassword=***&node=h:2",
        ),
        (
            "redis-sentinel://h:1?SENTINEL_PASSWORD=x1&sentinel%50assword=x2&a+password=x3",
            &["x1", "x2", "x3"],
            "redis-sentinel://h:1?SENTINEL_PASSWORD=***&sentinel%50assword=***&a+password=***",
        ),
        (
            "redis://h:1?sentinelPassword=",
            &[],
            "redis://h:1?sentinelPassword=",
        ),
        // Other `@`s after the authority: everything up to the last one is hidden.
        ("redis://:pw@h:1/0#x@y", &["pw"], "redis://***@y"),
        (
            "redis://h:1?sentinelPassword=se@cret",
            &["se@cret"],
            "redis://***",
        ),
        // No scheme (or not one before the first `://`): the user information starts
        // at the start.
        ("user:pw@h:1", &["pw"], "user:***@h:1"),
        (":p/w@h:1", &["p/w"], "***@h:1"),
        (
            "u:pw@h:1?next=redis://x",
            &["pw"],
            "u:***@h:1?next=redis://x",
        ),
        ("redis:/u:pw@h:1", &["pw"], "***@h:1"),
        (" redis://u:p/w@h:1", &["p/w"], " redis://***@h:1"),
        ("REDISS://U:PW@H:1", &["PW"], "REDISS://U:***@H:1"),
    ];

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
            "redis-sentinel://u:p@h:1/0?sentinelServiceName=m&sentinelUsername=su\
             &sentinelPassword=sp&node=h:2",
        ] {
            assert_eq!(url_refusal(url, false), None, "{url}");
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
    fn passwords_are_redacted_from_urls() {
        for (url, expected) in [
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("redis://:s3cret@h:1/2", "redis://:***@h:1/2"),
            ("rediss://app:s3cret@h:1", "rediss://app:***@h:1"),
            ("redis://app@h:1", "redis://app@h:1"),
            ("redis://a:p@ss@h:1?x=1", "redis://a:***@h:1?x=1"),
            (
                "redis-sentinel://u:pw@h:26379/0?sentinelServiceName=m&sentinelPassword=pw2&node=h:2",
                "redis-sentinel://u:***@h:26379/0?sentinelServiceName=m&sentinelPassword=***&node=h:2",
            ),
            ("not a url at all", "not a url at all"),
        ] {
            assert_eq!(redact_url(url), expected);
        }
    }

    #[test]
    fn passwords_with_any_characters_are_redacted() {
        for (url, passwords, expected) in TRICKY_URLS {
            let redacted = redact_url(url);
            assert_eq!(redacted, expected, "{url}");
            for password in passwords {
                assert!(!redacted.contains(password), "{url}: {redacted}");
            }
        }
    }

    /// The password ranges the fallback finds in `url`'s user information.
    fn fallback_password(url: &str) -> Hidden {
        let mut hidden = Vec::new();
        hide_userinfo_password(url, &mut hidden);
        hidden
    }

    #[test]
    fn well_formed_urls_have_their_password_found_by_the_url_crate() {
        for (url, password, expected) in [
            // Percent-encoded characters stay encoded, and hidden.
            (
                "redis://u:p%40ss%3Aw%2F%3F%23%20@h:1/0",
                Some("p%40ss%3Aw%2F%3F%23%20"),
                "redis://u:***@h:1/0",
            ),
            ("redis://u%3Ax:pw@h:1", Some("pw"), "redis://u%3Ax:***@h:1"),
            ("redis://:s3cret@h:1", Some("s3cret"), "redis://:***@h:1"),
            ("redis://u:6379@h", Some("6379"), "redis://u:***@h"),
            // IPv6 hosts.
            (
                "redis://u:pw@[::1]:6379/0",
                Some("pw"),
                "redis://u:***@[::1]:6379/0",
            ),
            (
                "rediss://:pw@[2001:db8::7]:6380",
                Some("pw"),
                "rediss://:***@[2001:db8::7]:6380",
            ),
            ("redis://[::1]:6379", None, "redis://[::1]:6379"),
            // A user without a password, and no user at all.
            ("redis://app@[::1]:6379/0", None, "redis://app@[::1]:6379/0"),
            ("redis://app@h:1", None, "redis://app@h:1"),
            ("redis://h:1/0?x=1", None, "redis://h:1/0?x=1"),
            // The case of the scheme and of the user information is kept.
            ("REDISS://U:PW@H:1", Some("PW"), "REDISS://U:***@H:1"),
            (" redis://u:pw@h:1", Some("pw"), " redis://u:***@h:1"),
            // Query passwords are hidden too (by the same rule as any URL's).
            (
                "redis-sentinel://u:pw1@[::1]:26379/0?sentinelServiceName=m&sentinelPassword=pw2",
                Some("pw1"),
                "redis-sentinel://u:***@[::1]:26379/0?sentinelServiceName=m&sentinelPassword=***",
            ),
        ] {
            let found = parsed_password(url).unwrap_or_else(|| panic!("{url}: not well-formed"));
            assert_eq!(found.clone().map(|range| &url[range]), password, "{url}");
            assert_eq!(redact_url(url), expected, "{url}");
            // Where the `url` crate reads the URL as written, the fallback agrees.
            assert_eq!(fallback_password(url), Vec::from_iter(found), "{url}");
        }
    }

    #[test]
    fn urls_the_url_crate_rejects_or_misreads_fall_back() {
        for (url, password, expected) in [
            // Unencoded characters the crate would encode, or read as a delimiter.
            ("redis://u:p w@h:1", "p w", "redis://u:***@h:1"),
            ("redis://u:pässwörd@h:1", "pässwörd", "redis://u:***@h:1"),
            ("redis://u:p:w@h:1", "p:w", "redis://u:***@h:1"),
            ("redis://u:p@w@[::1]:1", "p@w", "redis://u:***@[::1]:1"),
            ("redis://u:p;w@h:1", "p;w", "redis://u:***@h:1"),
            // A password the crate reads as a port and a path.
            ("redis://u:12/ss@h:1", "12/ss", "redis://***@h:1"),
            ("redis://u:12#ss@[::1]:1", "12#ss", "redis://***@[::1]:1"),
            // An empty password, which the crate reads as none.
            ("redis://u:@h:1", "", "redis://u:***@h:1"),
            // Tabs and line breaks, which the crate drops.
            ("redis://u:p\tw@h:1", "p\tw", "redis://u:***@h:1"),
            ("redis://u:pw@h:1\n", "pw", "redis://u:***@h:1\n"),
            // An invalid port or host: the crate refuses the URL.
            ("redis://u:pw@h:port", "pw", "redis://u:***@h:port"),
            ("redis://u:pw@[::1:1", "pw", "redis://u:***@[::1:1"),
        ] {
            assert_eq!(parsed_password(url), None, "{url}");
            let redacted = redact_url(url);
            assert_eq!(redacted, expected, "{url}");
            if !password.is_empty() {
                assert!(!redacted.contains(password), "{url}: {redacted}");
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
