//! Where Redis is (`--url`, `$REDIS_URL`), how lock keys are named (`--prefix`,
//! `--compat`), and connecting the client every subcommand uses.

use std::time::Duration;

use clap::Args;
use holdlock::{Compat, LockClient};

use crate::duration::parse_duration;
use crate::exit::Failure;

/// The Redis URL used when neither `--url` nor `REDIS_URL` gives one.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// Where Redis is and how lock keys are named.
#[derive(Debug, Args)]
pub(crate) struct ConnectionArgs {
    /// Redis URL [default: $REDIS_URL, else redis://127.0.0.1:6379]
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "HOLDLOCK_URL",
        hide_env_values = true
    )]
    url: Option<String>,

    /// Prefix of every lock key [default: holdlock:, or none with --compat redisson]
    #[arg(long, global = true, env = "HOLDLOCK_PREFIX")]
    prefix: Option<String>,

    /// The mutex's layout: `holdlock`, or `redisson` to see and take the locks of Java
    /// services that use Redisson's RLock.
    #[arg(long, global = true, value_name = "LAYOUT", env = "HOLDLOCK_COMPAT", default_value = "holdlock", value_parser = parse_compat)]
    compat: Compat,

    /// Give up connecting to Redis after this long.
    #[arg(long, global = true, value_name = "DUR", env = "HOLDLOCK_CONNECT_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    connect_timeout: Duration,
}

impl ConnectionArgs {
    /// `--url`, else `$REDIS_URL`, else the local default.
    pub(crate) fn resolved_url(&self) -> String {
        self.url
            .clone()
            .or_else(|| {
                std::env::var("REDIS_URL")
                    .ok()
                    .filter(|url| !url.is_empty())
            })
            .unwrap_or_else(|| DEFAULT_URL.to_owned())
    }
}

#[cfg(feature = "bench")]
impl ConnectionArgs {
    /// The options (but the URL) that connect another holdlock process as these do.
    pub(crate) fn args(&self) -> Vec<String> {
        let compat = match self.compat {
            Compat::Redisson => "redisson",
            _ => "holdlock",
        };
        let mut args = vec![
            format!("--compat={compat}"),
            format!("--connect-timeout={}ms", self.connect_timeout.as_millis()),
        ];
        args.extend(
            self.prefix
                .iter()
                .map(|prefix| format!("--prefix={prefix}")),
        );
        args
    }
}

pub(crate) async fn connect(
    args: &ConnectionArgs,
    lease: Option<Duration>,
) -> Result<LockClient, Failure> {
    connect_at(args, &args.resolved_url(), lease).await
}

/// A client of `url` (instead of the one the arguments give), with their prefix and
/// connect timeout.
pub(crate) async fn connect_at(
    args: &ConnectionArgs,
    url: &str,
    lease: Option<Duration>,
) -> Result<LockClient, Failure> {
    let mut builder = LockClient::builder(url)
        .compat(args.compat)
        .connect_timeout(args.connect_timeout);
    if let Some(prefix) = &args.prefix {
        builder = builder.prefix(prefix.as_str());
    }
    if let Some(lease) = lease {
        builder = builder.lease(lease);
    }
    builder.build().await.map_err(|error| {
        Failure::from_lock_error(
            &format!("cannot connect to {}", holdlock::redact_url(url)),
            &error,
        )
    })
}

/// `--compat`: `holdlock` or `redisson`.
fn parse_compat(text: &str) -> Result<Compat, String> {
    match text {
        "holdlock" => Ok(Compat::Holdlock),
        "redisson" => Ok(Compat::Redisson),
        other => Err(format!("{other:?} is no layout: use holdlock or redisson")),
    }
}
