//! Exit statuses (sysexits.h where one fits, the shell's otherwise) and [`Failure`],
//! the reason a subcommand stops, which carries its status.

use std::process::ExitCode;

use holdlock::LockError;

use crate::table::sanitize;

/// Success.
pub(crate) const EX_OK: u8 = 0;
/// Inspected lock is free (like `grep` finding nothing).
pub(crate) const EX_NOT_FOUND: u8 = 1;
/// Bad command line (sysexits.h `EX_USAGE`).
pub(crate) const EX_USAGE: u8 = 64;
/// The lock key holds something that is not a lock (`EX_DATAERR`).
pub(crate) const EX_DATAERR: u8 = 65;
/// Redis cannot be reached (`EX_UNAVAILABLE`).
pub(crate) const EX_UNAVAILABLE: u8 = 69;
/// The lock was lost while the command ran, or an internal error (`EX_SOFTWARE`).
pub(crate) const EX_SOFTWARE: u8 = 70;
/// The default exit status when the lock is busy or the period done (`EX_TEMPFAIL`).
pub(crate) const EX_TEMPFAIL: u8 = 75;
/// The command was found but could not be executed (as in the shell).
pub(crate) const EX_CANNOT_EXECUTE: u8 = 126;
/// The command was not found (as in the shell).
pub(crate) const EX_COMMAND_NOT_FOUND: u8 = 127;

/// A reason to stop, with the exit status it implies.
#[derive(Debug)]
pub(crate) struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// A library error, prefixed with what we were doing.
    pub(crate) fn from_lock_error(doing: &str, error: &LockError) -> Self {
        let code = match error {
            LockError::InvalidName { .. } | LockError::InvalidOption { .. } => EX_USAGE,
            // A server we cannot reach, cannot trust (TLS) or may not use (ACL).
            LockError::Redis(_)
            | LockError::Connect { .. }
            | LockError::ConnectTimeout { .. }
            | LockError::Tls { .. }
            | LockError::PermissionDenied { .. } => EX_UNAVAILABLE,
            LockError::WrongType { .. } => EX_DATAERR,
            _ => EX_SOFTWARE,
        };
        // A usage error says all there is to say; anything else needs its context.
        let message = if code == EX_USAGE {
            error.to_string()
        } else {
            format!("{doing}: {error}")
        };
        Self::new(code, message)
    }
}

/// Prints `failure` on stderr and gives its exit status.
pub(crate) fn fail(failure: &Failure) -> ExitCode {
    eprintln!("holdlock: {}", sanitize(&failure.message));
    ExitCode::from(failure.code)
}
