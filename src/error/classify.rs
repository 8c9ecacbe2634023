//! Reading Redis's and fred's errors: what a reply means for the call that got it
//! ([`Cause`], [`classify`]), and the [`LockError`] it is (`From`, `from_script`,
//! `of_connecting`). Every reading of Redis's or fred's error text for every call
//! happens here; texts only one caller expects are read where it is (see
//! `docs/design.md`, "Layers").

use fred::types::scripts::Script;

use super::LockError;

impl LockError {
    /// The error of a first connection that failed with `error`, to `address` (a URL
    /// with its passwords hidden, or hosts): an I/O error (refused, reset, a host that
    /// does not resolve) is [`LockError::Connect`], with the system's reason instead of
    /// fred's debug text of it; anything else (a TLS refusal, `WRONGPASS`) is as
    /// [`From`] reads it.
    pub(crate) fn of_connecting(error: fred::error::Error, address: String) -> Self {
        let io = *error.kind() == fred::error::ErrorKind::IO;
        let reason = io_reason(error.details());
        match LockError::from(error) {
            LockError::Redis(_) if io => LockError::Connect {
                url: address,
                reason,
            },
            other => other,
        }
    }

    /// Maps a Redis error, recognising WRONGTYPE for `key`.
    pub(crate) fn from_redis(error: fred::error::Error, key: &str) -> Self {
        Self::from_script(error, &[key], None)
    }

    /// Maps the error of `script` (if known) called with `keys`, recognising WRONGTYPE:
    /// for the key a script names in its own error (`WRONGTYPE KEYS[n] ...`, see
    /// `lua/`), else for the first key (every other key is checked by the scripts
    /// themselves); and a command the ACL refused inside the script, which Redis 7.0
    /// does not name, read from the line of the script's source that Redis names.
    pub(crate) fn from_script(
        error: fred::error::Error,
        keys: &[&str],
        script: Option<&Script>,
    ) -> Self {
        match classify(&error) {
            Cause::WrongType => {}
            Cause::NoPerm => {
                return LockError::PermissionDenied {
                    detail: refusal_detail(error.details(), script),
                };
            }
            _ => return LockError::from(error),
        }
        let details = error.details();
        let at = details.find("WRONGTYPE").unwrap_or(0);
        let named = details[at..]
            .strip_prefix("WRONGTYPE KEYS[")
            .and_then(|rest| rest.split_once(']'))
            .and_then(|(index, _)| index.parse::<usize>().ok())
            .and_then(|index| keys.get(index.checked_sub(1)?));
        match named.or(keys.first()) {
            Some(key) => LockError::WrongType {
                key: (*key).to_owned(),
            },
            None => LockError::from(error),
        }
    }
}

impl From<fred::error::Error> for LockError {
    /// Wraps a Redis error, recognising ACL refusals (`NOPERM`, and a command refused
    /// inside a script) and failed TLS handshakes.
    fn from(error: fred::error::Error) -> Self {
        let details = error.details();
        match classify(&error) {
            Cause::NoPerm => LockError::PermissionDenied {
                detail: refusal_detail(details, None),
            },
            Cause::Tls => {
                let detail = match details.find("InvalidCertificate") {
                    Some(at) => details[at..].trim_end_matches([' ', '}']).to_owned(),
                    None => details.to_string(),
                };
                LockError::Tls { detail }
            }
            _ => LockError::Redis(error),
        }
    }
}

/// What a Redis error means for the command that got it. Every reading of Redis's or
/// fred's error text happens here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// Lost in transit (connection closed or not routable, timed out, cancelled, out of
    /// attempts): the command may or may not have run. The only cause that may have
    /// changed anything.
    InTransit,
    /// `NOSCRIPT`: the script is not loaded on the server, and did not run.
    NoScript,
    /// `WRONGTYPE`: a key holds another kind of value.
    WrongType,
    /// `NOPERM`: refused by the ACL; or a command a script called was refused by the
    /// ACL (which Redis reports as an `ERR`, see [`SCRIPT_REFUSALS`]). A script keeps
    /// what it wrote before the refused command: the scripts' writes are granted by
    /// the documented rule, so only a rule narrower than that can leave a change half
    /// done.
    NoPerm,
    /// The TLS handshake failed.
    Tls,
    /// Not run, and worth sending again shortly: the key's slot is elsewhere or on the
    /// move (`MOVED` or `ASK`, which holdlock follows itself, see `scripts::eval`;
    /// `TRYAGAIN` while a slot's keys are half migrated), or the server or cluster is
    /// not ready (`CLUSTERDOWN`, `LOADING`).
    TryAgain,
    /// Any other reply of Redis's (`NOREPLICAS`, `OOM`, `ERR ...`): nothing was done.
    Refused,
}

/// Reads what `error` means (see [`Cause`]).
pub(crate) fn classify(error: &fred::error::Error) -> Cause {
    use fred::error::ErrorKind;
    let details = error.details();
    if details.starts_with("NOSCRIPT") {
        return Cause::NoScript;
    }
    if details.contains("WRONGTYPE") {
        return Cause::WrongType;
    }
    if details.contains("NOPERM") || SCRIPT_REFUSALS.iter().any(|text| details.contains(text)) {
        return Cause::NoPerm;
    }
    #[cfg(feature = "tls-rustls")]
    if *error.kind() == ErrorKind::Tls {
        return Cause::Tls;
    }
    if details.contains("InvalidCertificate") {
        return Cause::Tls;
    }
    if TRY_AGAIN.iter().any(|text| details.starts_with(text)) {
        return Cause::TryAgain;
    }
    let in_transit = matches!(
        error.kind(),
        ErrorKind::IO
            | ErrorKind::Canceled
            | ErrorKind::Timeout
            | ErrorKind::Routing
            | ErrorKind::Backpressure
    ) || details.contains("attempts")
        || details.contains("route")
        || details.contains("onnection")
        // The reply's channel was dropped: fred's connection task ended with the
        // command in flight (see `connection::connect`).
        || details.contains("channel closed");
    if in_transit {
        Cause::InTransit
    } else {
        Cause::Refused
    }
}

/// How Redis says that it did not run a command but would if asked again (see
/// [`Cause::TryAgain`]), and how fred says that it did not follow a redirection
/// (holdlock sends scripts with `max_redirections` 0, see `scripts::eval`).
const TRY_AGAIN: [&str; 6] = [
    "MOVED ",
    "ASK ",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "LOADING",
    "Too many redirections.",
];

/// How Redis reports a command that a script called and the ACL refused: with `ERR`,
/// not `NOPERM`. Redis 7.2 and later name the command ("ERR ACL failure in script: User
/// u has no permissions to run the 'zadd' command script: SHA, on @user_script:40.");
/// 6.0 to 7.0 do not ("ERR The user executing the script can't run this command or
/// subcommand script: SHA, on @user_script:40.", and "... can't access at least one of
/// the keys ...", "... can't publish to the channel ..." for keys and channels).
const SCRIPT_REFUSALS: [&str; 2] = ["ACL failure in script:", "The user executing the script "];

/// The `detail` of [`LockError::PermissionDenied`]: Redis's explanation after
/// `NOPERM`; or, for a command refused inside a script, Redis's explanation, the
/// command (when Redis does not name it: the one `script` calls on the line Redis
/// names, if Redis names `script`) and where the script called it.
fn refusal_detail(details: &str, script: Option<&Script>) -> String {
    if let Some(at) = details.find("NOPERM") {
        return details[at + "NOPERM".len()..].trim().to_owned();
    }
    let start = SCRIPT_REFUSALS.iter().find_map(|text| {
        let at = details.find(text)?;
        Some(if text.starts_with("ACL") {
            at + text.len()
        } else {
            at
        })
    });
    let Some(start) = start else {
        return details.trim().to_owned();
    };
    let explanation = &details[start..];
    let explanation = explanation[..explanation.find(" script: ").unwrap_or(explanation.len())]
        .trim()
        .trim_end_matches('.');
    let sha = hex_after(details, "script: ").or_else(|| hex_after(details, "f_"));
    let line = number_after(details, "@user_script:");
    let mut detail = explanation.to_owned();
    // Redis 7.2 and later name it ("... to run the 'zadd' command").
    if !explanation.contains("' command") {
        let commands = sha
            .zip(line)
            .and_then(|(sha, line)| script_commands(script?, sha, line))
            .unwrap_or_default();
        if !commands.is_empty() {
            let quoted: Vec<String> = commands.iter().map(|c| format!("'{c}'")).collect();
            detail = format!("{detail}: {}", quoted.join(" or "));
        }
    }
    match (line, sha) {
        (Some(line), Some(sha)) => format!("{detail} (line {line} of script {sha})"),
        (Some(line), None) => format!("{detail} (line {line} of a script)"),
        _ => detail,
    }
}

/// The 40 hexadecimal digits (a script's SHA-1) right after the first `marker` that
/// has them.
fn hex_after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    text.match_indices(marker).find_map(|(at, _)| {
        let hex = text.get(at + marker.len()..at + marker.len() + 40)?;
        hex.bytes().all(|b| b.is_ascii_hexdigit()).then_some(hex)
    })
}

/// The number right after `marker` (spaces allowed between).
fn number_after(text: &str, marker: &str) -> Option<usize> {
    let rest = text[text.find(marker)? + marker.len()..].trim_start();
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The commands that `script` calls on its line `line` (counted from 1), if its SHA-1
/// is `sha` (the script Redis names is the one sent).
fn script_commands(script: &Script, sha: &str, line: usize) -> Option<Vec<String>> {
    if !script.sha1().eq_ignore_ascii_case(sha) {
        return None;
    }
    let text = script.lua()?.lines().nth(line.checked_sub(1)?)?;
    Some(commands_on(text).into_iter().map(str::to_owned).collect())
}

/// The commands that `line` of a Lua script calls: the quoted words of each
/// `redis.call(...)` or `redis.pcall(...)`'s first argument (both of
/// `redis.call(p == 'spublish' and 'spublish' or 'publish', ...)`).
fn commands_on(line: &str) -> Vec<&str> {
    let mut commands = Vec::new();
    for (at, _) in line.match_indices("redis.") {
        let rest = &line[at + "redis.".len()..];
        let Some(rest) = rest
            .strip_prefix("call(")
            .or_else(|| rest.strip_prefix("pcall("))
        else {
            continue;
        };
        let argument = &rest[..rest.find([',', ')']).unwrap_or(rest.len())];
        for word in argument.split(['\'', '"']).skip(1).step_by(2) {
            if !word.is_empty() && !commands.contains(&word) {
                commands.push(word);
            }
        }
    }
    commands
}

impl LockError {
    /// Redis did not answer within a call's wait (see `waiting::within_budget`): a
    /// [`LockError::Redis`] of kind `Timeout`.
    pub(crate) fn unanswered() -> Self {
        LockError::Redis(fred::error::Error::new(
            fred::error::ErrorKind::Timeout,
            "redis did not answer within the call's wait",
        ))
    }

    /// Whether the call that failed may have run: its reply was lost in transit. Every
    /// other error (one Redis replied with, or found before sending) means nothing was
    /// done.
    pub(crate) fn outcome_unknown(&self) -> bool {
        matches!(self, LockError::Redis(error) if classify(error) == Cause::InTransit)
    }
}

/// The reason of an I/O error as fred keeps it (the `Debug` text of the
/// `std::io::Error`, e.g. `Os { code: 111, kind: ConnectionRefused, message:
/// "Connection refused" }`): its message and code, or the text as it is.
fn io_reason(details: &str) -> String {
    let message = details
        .split_once("message: \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(message, _)| message);
    let code = details
        .split_once("code: ")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .filter(|code| !code.is_empty());
    match (message, code) {
        (Some(message), Some(code)) => format!("{message} (os error {code})"),
        (Some(message), None) => message.to_owned(),
        _ => details.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fred::error::{Error, ErrorKind};

    #[test]
    fn an_os_error_reads_as_the_system_says_it() {
        let debug = r#"Os { code: 111, kind: ConnectionRefused, message: "Connection refused" }"#;
        assert_eq!(io_reason(debug), "Connection refused (os error 111)");
        assert_eq!(
            io_reason("Custom { kind: Other }"),
            "Custom { kind: Other }"
        );
        let refused = LockError::of_connecting(Error::new(ErrorKind::IO, debug), "h:1".into());
        assert!(matches!(refused, LockError::Connect { url, .. } if url == "h:1"));
        let other =
            LockError::of_connecting(Error::new(ErrorKind::Auth, "WRONGPASS"), "h:1".into());
        assert!(!matches!(other, LockError::Connect { .. }), "{other:?}");
    }

    fn wrong_type(details: &str, keys: &[&str]) -> Option<String> {
        match LockError::from_script(
            Error::new(ErrorKind::InvalidArgument, details.to_owned()),
            keys,
            None,
        ) {
            LockError::WrongType { key } => Some(key),
            _ => None,
        }
    }

    #[test]
    fn a_redirect_or_a_slot_on_the_move_is_tried_again_and_a_dropped_reply_is_unknown() {
        let cause = |kind, details: &str| classify(&Error::new(kind, details.to_owned()));
        for (kind, details) in [
            (ErrorKind::Routing, "Too many redirections."),
            (
                ErrorKind::Unknown,
                "TRYAGAIN Multiple keys request during rehashing of slot",
            ),
            (ErrorKind::Cluster, "MOVED 3999 127.0.0.1:6381"),
            (ErrorKind::Cluster, "ASK 3999 127.0.0.1:6381"),
            (ErrorKind::Cluster, "CLUSTERDOWN Hash slot not served"),
            (
                ErrorKind::Unknown,
                "LOADING Redis is loading the dataset in memory",
            ),
        ] {
            assert_eq!(cause(kind, details), Cause::TryAgain, "{details}");
        }
        for (kind, details) in [
            (ErrorKind::Unknown, "channel closed"),
            (ErrorKind::Routing, "Max attempts reached."),
            (ErrorKind::Unknown, "Too many failed write attempts."),
            (ErrorKind::IO, "Connection closed."),
        ] {
            assert_eq!(cause(kind, details), Cause::InTransit, "{details}");
        }
    }

    #[test]
    fn wrongtype_names_the_key_the_script_named() {
        let keys = ["p:{a}", "p:{a}:token"];
        let named = "WRONGTYPE KEYS[2] p:{a}:token holds the wrong kind of value";
        assert_eq!(wrong_type(named, &keys).as_deref(), Some("p:{a}:token"));
        let plain = "WRONGTYPE Operation against a key holding the wrong kind of value";
        assert_eq!(wrong_type(plain, &keys).as_deref(), Some("p:{a}"));
        // An index the call did not have falls back to the first key.
        let beyond = "WRONGTYPE KEYS[3] x holds the wrong kind of value";
        assert_eq!(wrong_type(beyond, &keys).as_deref(), Some("p:{a}"));
        assert_eq!(
            wrong_type("WRONGTYPE KEYS[0] x", &keys).as_deref(),
            Some("p:{a}")
        );
        assert_eq!(wrong_type("ERR something else", &keys), None);
    }

    /// `LockError::from` an error reply with `text`, as fred gives it.
    fn refused(text: &str) -> LockError {
        LockError::from(Error::new(ErrorKind::Unknown, text.to_owned()))
    }

    fn denied(text: &str) -> String {
        match refused(text) {
            LockError::PermissionDenied { detail } => detail,
            other => panic!("not a permission error: {other:?}"),
        }
    }

    /// Redis 7.0's reply when the ACL refuses a command that line `line` of `script`
    /// calls (as a user without `zadd` got for an `EVAL` of `return lib.add(KEYS[1])`,
    /// whose `lib.add` calls `zadd` on line 3).
    fn refused_in_script(script: &Script, line: usize) -> String {
        format!(
            "ERR The user executing the script can't run this command or subcommand \
             script: {}, on @user_script:{line}.",
            script.sha1()
        )
    }

    /// The detail of `text` as the error of `script`.
    fn denied_in(script: &Script, text: &str) -> String {
        let error = Error::new(ErrorKind::Unknown, text.to_owned());
        match LockError::from_script(error, &["k"], Some(script)) {
            LockError::PermissionDenied { detail } => detail,
            other => panic!("not a permission error: {other:?}"),
        }
    }

    /// The line (counted from 1) of `source` that first contains `text`.
    fn line_of(source: &str, text: &str) -> usize {
        1 + source.lines().position(|line| line.contains(text)).unwrap()
    }

    #[test]
    fn a_command_refused_inside_a_script_is_a_permission_error_naming_the_command() {
        // A script that is not this crate's: Redis 7.0 does not say which command.
        let real = "ERR The user executing the script can't run this command or subcommand \
                    script: bbc548ba677bc9190e4e8d8adbdf0d2257a5f193, on @user_script:3.";
        assert_eq!(
            denied(real),
            "The user executing the script can't run this command or subcommand \
             (line 3 of script bbc548ba677bc9190e4e8d8adbdf0d2257a5f193)"
        );
        // The script sent, alone or after others: the command is read from the line.
        let available = Script::from_lua(include_str!("../../lua/sem_available.lua"));
        let line = line_of(available.lua().unwrap(), "redis.call('zcount'");
        let text = refused_in_script(&available, line);
        let detail = denied_in(&available, &text);
        assert!(
            detail.starts_with(
                "The user executing the script can't run this command or subcommand: 'zcount' (line "
            ),
            "{detail}"
        );
        // Not read from another script than the one Redis names, nor without one.
        let other = Script::from_lua("return 1");
        assert!(!denied_in(&other, &text).contains("'zcount'"));
        assert!(!denied(&text).contains("'zcount'"));
        let fair = Script::from_lua(concat!(
            include_str!("../../lua/fencing.lua"),
            include_str!("../../lua/fair_queue.lua"),
            include_str!("../../lua/fair_acquire.lua")
        ));
        for (command, called) in [
            ("'zadd'", "redis.call('zadd'"),
            ("'zrangebyscore'", "redis.call('zrangebyscore'"),
            ("'spublish' or 'publish'", "'spublish' or 'publish'"),
        ] {
            let line = line_of(fair.lua().unwrap(), called);
            let detail = denied_in(&fair, &refused_in_script(&fair, line));
            assert!(
                detail.contains(&format!("subcommand: {command} (line {line} of script ")),
                "{detail}"
            );
        }
        // Redis 7.2 and later name the command themselves.
        let named = "ERR ACL failure in script: User locker has no permissions to run the \
                     'zadd' command script: bbc548ba677bc9190e4e8d8adbdf0d2257a5f193, on \
                     @user_script:3.";
        assert_eq!(
            denied(named),
            "User locker has no permissions to run the 'zadd' command \
             (line 3 of script bbc548ba677bc9190e4e8d8adbdf0d2257a5f193)"
        );
        // Keys and channels a script names, and a refused command outside a script.
        let key = "ERR The user executing the script can't access at least one of the keys \
                   mentioned in the command arguments script: \
                   9e77701a5a91f4454e2a1278e8e30a2e45732ccf, on @user_script:1.";
        assert!(denied(key).contains("keys mentioned"), "{}", denied(key));
        let channel = "ERR The user executing the script can't publish to the channel \
                       mentioned in the command script: \
                       21b719501ca72422320750f78463d384155c83df, on @user_script:1.";
        assert!(denied(channel).contains("channel"), "{}", denied(channel));
        assert_eq!(
            denied("NOPERM this user has no permissions to run the 'zadd' command"),
            "this user has no permissions to run the 'zadd' command"
        );
        assert!(matches!(
            refused("ERR Error running script: @user_script:3: something else"),
            LockError::Redis(_)
        ));
    }
}
