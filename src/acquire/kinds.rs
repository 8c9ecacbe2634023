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
/// (`$call` for a wait, `$try` for a single try), its descriptor in the client's
/// layout (`$layout`, picked here once for the options check and the take step), the
/// options it honours (`every`, or those of its descriptor: `its own`), and its take
/// step: `$take`, with the name, the descriptor, the client, the checked options and
/// the give-up bound to the given names.
macro_rules! by_name {
    (
        $kind:ident => $guard:ty, call: $call:literal / $try:literal,
        layout: $layout:expr, options: $honoured:ident,
        take: |$name:ident, $descriptor:ident, $client:ident, $options:ident, $give_up:ident|
            $take:expr $(,)?
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
                by_name!(@resolve $honoured, client, options, $layout)
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
                let layout: fn(crate::Compat) -> Kind = $layout;
                let $descriptor = layout($client.compat());
                let $name = self.0.as_str();
                $take
            }
        }
    };
    (@resolve every, $client:ident, $options:ident, $layout:expr) => {
        $options.resolve($client.engine().config())
    };
    (@resolve its_own, $client:ident, $options:ident, $layout:expr) => {{
        let config = $client.engine().config();
        let layout: fn(crate::Compat) -> Kind = $layout;
        $options.resolve_for(config, layout(config.compat))
    }};
}

by_name!(
    Mutex => LockGuard, call: "lock" / "try_lock", layout: Kind::mutex, options: every,
    take: |name, kind, client, options, give_up| client.take_mutex(name, kind, options, give_up).await,
);
by_name!(
    Fair => LockGuard, call: "fair_lock" / "fair_lock", layout: Kind::fair, options: its_own,
    take: |name, kind, client, options, give_up| client.take_fair(name, kind, options, give_up).await,
);
by_name!(
    Read => ReadGuard, call: "read_lock" / "read_lock", layout: Kind::read, options: its_own,
    take: |name, side, client, options, give_up| {
        let taken = client.take_side(name, side, options, give_up).await?;
        Ok(taken.map(ReadGuard::new))
    },
);
by_name!(
    Write => WriteGuard, call: "write_lock" / "write_lock", layout: Kind::write, options: its_own,
    take: |name, side, client, options, give_up| {
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
