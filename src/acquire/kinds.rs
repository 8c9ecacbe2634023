//! The kinds the front door takes, each a [`Take`]: what sets each apart (its guard,
//! the options it honours, its span's name and the step that takes it). A kind owns
//! what it takes (the name, the semaphore, the names), so a request borrows nothing.

use super::sealed::Take;
use super::take;
use crate::client::LockClient;
use crate::error::Result;
use crate::guard::LockGuard;
use crate::multi::{MultiGuard, take_all};
use crate::options::{LockOptions, ResolvedOptions};
use crate::rw::{ReadGuard, WriteGuard};
use crate::scripts::Kind;
use crate::semaphore::{Permit, Semaphore};
use crate::waiting::GiveUp;

/// The mutex `name` (see [`LockClient::lock`]).
#[derive(Debug, Clone)]
pub struct Mutex(pub(super) String);

/// The fair lock `name` (see [`LockClient::fair_lock`]).
#[derive(Debug, Clone)]
pub struct Fair(pub(super) String);

/// The read side of the read-write lock `name` (see [`LockClient::read_lock`]).
#[derive(Debug, Clone)]
pub struct Read(pub(super) String);

/// The write side of the read-write lock `name` (see [`LockClient::write_lock`]).
#[derive(Debug, Clone)]
pub struct Write(pub(super) String);

/// A permit of a semaphore (see [`Semaphore::acquire`]).
#[derive(Debug, Clone)]
pub struct SemaphorePermit(pub(super) Semaphore);

/// Every lock of a set of names, all or nothing (see [`LockClient::lock_all`]).
#[derive(Debug)]
pub struct All {
    /// The names in lock order, or why they cannot be taken.
    pub(super) names: Result<Vec<String>>,
}

/// The kind `$kind`, taken by its one name: its guard `$guard`, its span's call names
/// (`$call` for a wait, `$try` for a single try), the descriptor `$layout` its options
/// are checked against (`None`: every option), and its take step: `$take`, with the
/// name, the client, the checked options and the give-up bound to the given names.
macro_rules! by_name {
    (
        $kind:ident => $guard:ty, call: $call:literal / $try:literal, layout: $layout:expr,
        take: |$name:ident, $client:ident, $options:ident, $give_up:ident| $take:expr $(,)?
    ) => {
        impl Take for $kind {
            type Guard = $guard;

            fn name(&self) -> &str {
                &self.0
            }

            fn resolve(
                &self,
                client: &LockClient,
                options: &LockOptions,
            ) -> Result<ResolvedOptions> {
                let config = client.engine().config();
                let layout: fn(crate::Compat) -> Option<Kind> = $layout;
                match layout(config.compat) {
                    Some(kind) => options.resolve_for(config, kind),
                    None => options.resolve(config),
                }
            }

            fn call(&self, single_try: bool) -> Option<&'static str> {
                Some(if single_try { $try } else { $call })
            }

            async fn take<D: GiveUp + Send>(
                self,
                $client: &LockClient,
                $options: ResolvedOptions,
                $give_up: D,
            ) -> Result<Result<$guard, D::GaveUp>> {
                let $name = self.0.as_str();
                $take
            }
        }
    };
}

by_name!(
    Mutex => LockGuard, call: "lock" / "try_lock", layout: |_| None,
    take: |name, client, options, give_up| client.take_mutex(name, options, give_up).await,
);
by_name!(
    Fair => LockGuard, call: "fair_lock" / "fair_lock", layout: |compat| Some(Kind::fair(compat)),
    take: |name, client, options, give_up| client.take_fair(name, options, give_up).await,
);
by_name!(
    Read => ReadGuard, call: "read_lock" / "read_lock", layout: |compat| Some(Kind::read(compat)),
    take: |name, client, options, give_up| {
        let side = Kind::read(client.compat());
        let taken = client.take_side(name, side, options, give_up).await?;
        Ok(taken.map(ReadGuard::new))
    },
);
by_name!(
    Write => WriteGuard, call: "write_lock" / "write_lock", layout: |compat| Some(Kind::write(compat)),
    take: |name, client, options, give_up| {
        let side = Kind::write(client.compat());
        let taken = client.take_side(name, side, options, give_up).await?;
        Ok(taken.map(WriteGuard::new))
    },
);

impl Take for SemaphorePermit {
    type Guard = Permit;

    fn name(&self) -> &str {
        self.0.name()
    }

    fn resolve(&self, _: &LockClient, options: &LockOptions) -> Result<ResolvedOptions> {
        self.0.resolve(options)
    }

    fn call(&self, _: bool) -> Option<&'static str> {
        Some("semaphore.acquire")
    }

    async fn take<D: GiveUp + Send>(
        self,
        _: &LockClient,
        options: ResolvedOptions,
        give_up: D,
    ) -> Result<Result<Permit, D::GaveUp>> {
        self.0.take(options, give_up).await
    }
}

impl Take for All {
    type Guard = MultiGuard;

    fn name(&self) -> &str {
        ""
    }

    fn resolve(&self, client: &LockClient, options: &LockOptions) -> Result<ResolvedOptions> {
        options.resolve(client.engine().config())
    }

    /// None: each member is a mutex taken in a span of its own.
    fn call(&self, _: bool) -> Option<&'static str> {
        None
    }

    async fn take<D: GiveUp + Send>(
        self,
        client: &LockClient,
        options: ResolvedOptions,
        give_up: D,
    ) -> Result<Result<MultiGuard, D::GaveUp>> {
        let names = self.names?;
        let member =
            |name: &str, options, give_up| take(client, Mutex(name.to_owned()), options, give_up);
        take_all(&names, options, give_up, member).await
    }
}
