//! [`redact_url`]: a client URL as this crate shows it, its passwords hidden, whatever
//! characters they hold.

use std::ops::Range;

use super::{is_scheme, parse};

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
}
