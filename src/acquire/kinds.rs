//! The kinds the front door takes, each a [`Take`]: what sets each apart (its guard,
//! the options it honours, its span's name and the step that takes it).

use std::future::Future;

use super::sealed::{OneName, Take};
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
#[derive(Debug, Clone, Copy)]
pub struct Mutex<'n>(pub(super) &'n str);

/// The fair lock `name` (see [`LockClient::fair_lock`]).
#[derive(Debug, Clone, Copy)]
pub struct Fair<'n>(pub(super) &'n str);

/// The read side of the read-write lock `name` (see [`LockClient::read_lock`]).
#[derive(Debug, Clone, Copy)]
pub struct Read<'n>(pub(super) &'n str);

/// The write side of the read-write lock `name` (see [`LockClient::write_lock`]).
#[derive(Debug, Clone, Copy)]
pub struct Write<'n>(pub(super) &'n str);

/// A permit of a semaphore (see [`Semaphore::acquire`]).
#[derive(Debug, Clone, Copy)]
pub struct SemaphorePermit<'s>(pub(super) &'s Semaphore);

/// Every lock of a set of names, all or nothing (see [`LockClient::lock_all`]).
#[derive(Debug)]
pub struct All {
    /// The names in lock order, or why they cannot be taken.
    pub(super) names: Result<Vec<String>>,
}

impl<K: OneName> Take for K {
    type Guard = K::Guard;

    fn name(&self) -> &str {
        self.lock_name()
    }

    fn resolve(&self, client: &LockClient, options: &LockOptions) -> Result<ResolvedOptions> {
        K::resolve(client, options)
    }

    fn call(&self, single_try: bool) -> Option<&'static str> {
        Some(K::call(single_try))
    }

    fn take<D: GiveUp + Send>(
        self,
        client: &LockClient,
        options: ResolvedOptions,
        give_up: D,
    ) -> impl Future<Output = Result<Result<K::Guard, D::GaveUp>>> + Send {
        OneName::take(self, client, options, give_up)
    }
}

impl OneName for Mutex<'_> {
    type Guard = LockGuard;

    fn lock_name(&self) -> &str {
        self.0
    }

    fn call(single_try: bool) -> &'static str {
        if single_try { "try_lock" } else { "lock" }
    }

    fn take<D: GiveUp + Send>(
        self,
        client: &LockClient,
        options: ResolvedOptions,
        give_up: D,
    ) -> impl Future<Output = Result<Result<LockGuard, D::GaveUp>>> + Send {
        client.take_mutex(self.0, options, give_up)
    }
}

impl OneName for Fair<'_> {
    type Guard = LockGuard;

    fn lock_name(&self) -> &str {
        self.0
    }

    fn call(_: bool) -> &'static str {
        "fair_lock"
    }

    fn resolve(client: &LockClient, options: &LockOptions) -> Result<ResolvedOptions> {
        let config = client.engine().config();
        options.resolve_for(config, Kind::fair(config.compat))
    }

    fn take<D: GiveUp + Send>(
        self,
        client: &LockClient,
        options: ResolvedOptions,
        give_up: D,
    ) -> impl Future<Output = Result<Result<LockGuard, D::GaveUp>>> + Send {
        client.take_fair(self.0, options, give_up)
    }
}

/// The read-write lock's side `$side`, whose guard is `$guard`, its call `$call` and
/// its kind `$kind` of a layout.
macro_rules! side {
    ($side:ident, $guard:ident, $call:literal, $kind:path) => {
        impl OneName for $side<'_> {
            type Guard = $guard;

            fn lock_name(&self) -> &str {
                self.0
            }

            fn call(_: bool) -> &'static str {
                $call
            }

            fn resolve(client: &LockClient, options: &LockOptions) -> Result<ResolvedOptions> {
                let config = client.engine().config();
                options.resolve_for(config, $kind(config.compat))
            }

            async fn take<D: GiveUp + Send>(
                self,
                client: &LockClient,
                options: ResolvedOptions,
                give_up: D,
            ) -> Result<Result<$guard, D::GaveUp>> {
                let side = $kind(client.compat());
                let taken = client.take_side(self.0, side, options, give_up).await?;
                Ok(taken.map($guard::new))
            }
        }
    };
}
side!(Read, ReadGuard, "read_lock", Kind::read);
side!(Write, WriteGuard, "write_lock", Kind::write);

impl Take for SemaphorePermit<'_> {
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

    fn take<D: GiveUp + Send>(
        self,
        _: &LockClient,
        options: ResolvedOptions,
        give_up: D,
    ) -> impl Future<Output = Result<Result<Permit, D::GaveUp>>> + Send {
        self.0.take(options, give_up)
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
        let member = |name, options, give_up| take(client, Mutex(name), options, give_up);
        take_all(&names, options, give_up, member).await
    }
}
