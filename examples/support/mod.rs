//! Shared by the examples: find a Redis (and a PostgreSQL) to talk to.
//!
//! With `REDIS_URL` set (or a URL given on the command line) the examples use that
//! server. Otherwise they start a throwaway `redis-server` on a free loopback port,
//! with persistence off, and stop it when they finish. The same for PostgreSQL with
//! `DATABASE_URL`: otherwise a throwaway server of `tests/common/postgres.rs`.
#![allow(dead_code)] // each example uses a part of it

use std::error::Error;
use std::time::Duration;

// The throwaway-server code the tests use too.
#[path = "../../tests/common/server.rs"]
mod server;
// And their throwaway PostgreSQL (which uses `server`'s free ports).
#[path = "../../tests/common/postgres.rs"]
mod postgres;

use server::Reply;

/// The error type of the examples: anything, with a readable message.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// A Redis server to use: one given by the user, or a throwaway one of our own.
#[derive(Debug)]
pub struct Redis {
    url: String,
    throwaway: Option<server::Process>,
}

impl Redis {
    /// Uses `explicit_url`, else `REDIS_URL`, else starts a throwaway `redis-server`.
    pub fn from_url_or_env_or_start(explicit_url: Option<String>) -> Result<Self, BoxError> {
        let given = explicit_url.or_else(|| {
            std::env::var("REDIS_URL")
                .ok()
                .filter(|url| !url.is_empty())
        });
        match given {
            Some(url) => Ok(Redis {
                url,
                throwaway: None,
            }),
            None => Self::start_throwaway(),
        }
    }

    /// The URL to connect to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether this is a server we started (and will stop) ourselves.
    pub fn is_throwaway(&self) -> bool {
        self.throwaway.is_some()
    }

    /// The loopback port of a throwaway server (`None` for one given by URL).
    pub fn port(&self) -> Option<u16> {
        self.throwaway.as_ref().map(|process| process.port)
    }

    /// Stops a throwaway server and starts it again on the same port, empty (it keeps
    /// no data), and returns once the new process answers.
    pub fn restart(&mut self) -> Result<(), BoxError> {
        let Some(process) = self.throwaway.as_mut() else {
            return Err("only a throwaway redis-server can be restarted".into());
        };
        Ok(process.restart(Duration::ZERO, Duration::from_secs(10))?)
    }

    /// Starts a throwaway `redis-server` whatever `REDIS_URL` says.
    pub fn start() -> Result<Self, BoxError> {
        Self::start_throwaway()
    }

    /// Starts `redis-server` on a free loopback port, without persistence, under a
    /// wrapper that stops it when our end of its stdin closes: when the `Redis` is
    /// dropped, or when this process exits or crashes. So the server can never outlive
    /// the example. The wrapper itself ignores Ctrl-C, so it is still there to do that
    /// after one.
    fn start_throwaway() -> Result<Self, BoxError> {
        let program = server::server_program();
        if server::which(&program).is_none() {
            return Err(format!(
                "{program} is not installed (e.g. `apt-get install redis-server`); \
                 or point REDIS_URL at a Redis you have"
            )
            .into());
        }
        let options = server::Options {
            log_file: false,
            ignore_interrupts: true,
        };
        let process = server::start(&program, |_| Vec::new(), |_| Vec::new(), options)?;
        Ok(Redis {
            url: format!("redis://127.0.0.1:{}", process.port),
            throwaway: Some(process),
        })
    }
}

/// Sends one command to the Redis on loopback `port` over a fresh connection, and
/// returns a simple, integer or bulk reply as text (an error reply as an error).
pub fn command(port: u16, args: &[&str]) -> Result<String, BoxError> {
    match server::read_reply(&mut server::send(port, args)?)? {
        Reply::Line(line) => match line.split_at(line.len().min(1)) {
            ("+" | ":", rest) => Ok(rest.to_owned()),
            ("-", rest) => Err(rest.to_owned().into()),
            _ => Err(format!("unexpected reply {line:?}").into()),
        },
        Reply::Bulk(contents) => Ok(contents.unwrap_or_default()),
    }
}

/// A throwaway Redis Cluster on loopback: primaries with replicas, every node a
/// `redis-server` of our own, stopped (by its PID) when this is dropped.
#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<server::Process>,
}

impl Cluster {
    /// Starts `primaries` primaries with `replicas` replicas each (`redis-cli --cluster
    /// create`), and returns once every node reports the cluster ok and knows every
    /// other, and every replica is in sync. `extra` are more arguments for each node.
    pub fn start(primaries: usize, replicas: usize, extra: &[&str]) -> Result<Self, BoxError> {
        let program = server::server_program();
        for program in [program.clone(), server::cli_program()] {
            if server::which(&program).is_none() {
                return Err(format!(
                    "{program} is not installed (e.g. `apt-get install redis-server redis-tools`)"
                )
                .into());
            }
        }
        // Each node logs to a file of its own (removed when it stops for good), for
        // the lines of a failover that did not complete.
        let options = server::Options {
            log_file: true,
            ignore_interrupts: true,
        };
        let extra: Vec<String> = extra.iter().map(|&arg| arg.to_owned()).collect();
        let nodes = (0..primaries * (1 + replicas))
            .map(|_| {
                let node_args = |port| {
                    let mut args = server::cluster_node_args(port);
                    args.extend(extra.iter().cloned());
                    args
                };
                server::start(&program, |_| Vec::new(), node_args, options)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let cluster = Cluster { nodes };
        server::create_cluster(&cluster.ports(), replicas)?;
        let started = std::time::Instant::now();
        while !server::cluster_settled(&cluster.ports()) {
            if started.elapsed() > Duration::from_secs(30) {
                return Err("the new cluster did not settle within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(cluster)
    }

    /// Every node's loopback port (which are primaries changes as the cluster does).
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|node| node.port).collect()
    }

    /// The log file of the node on loopback `port` (a restarted node appends to it).
    pub fn log(&self, port: u16) -> Option<std::path::PathBuf> {
        self.nodes
            .iter()
            .find(|node| node.port == port)
            .and_then(|node| node.log.clone())
    }

    /// Stops the node on loopback `port` and starts it again on the same port, as the
    /// same node (its `nodes.conf` is kept). With `keep_data` it is stopped by
    /// `SHUTDOWN SAVE`, so it comes back with every write it acknowledged; without, it
    /// is stopped without saving (a replica then copies its primary again). Returns once
    /// the new process answers.
    pub fn restart(&mut self, port: u16, keep_data: bool) -> Result<(), BoxError> {
        let node = self
            .nodes
            .iter_mut()
            .find(|node| node.port == port)
            .ok_or_else(|| format!("no node of the cluster on port {port}"))?;
        if keep_data {
            // The connection closes instead of a reply when the server exits; an error
            // reply means it refused to stop.
            let reply = server::send(port, &["SHUTDOWN", "SAVE"])
                .and_then(|mut reply| server::read_reply(&mut reply));
            if let Ok(Reply::Line(line)) = reply
                && line.starts_with('-')
            {
                return Err(format!("SHUTDOWN SAVE on port {port}: {line}").into());
            }
            let started = std::time::Instant::now();
            while server::ping(port) {
                if started.elapsed() > Duration::from_secs(15) {
                    return Err(format!("the node on port {port} did not stop within 15 s").into());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok(node.restart(Duration::ZERO, Duration::from_secs(10))?)
    }

    /// The `redis-cluster://` URL naming every node.
    pub fn url(&self) -> String {
        let ports = self.ports();
        let others: Vec<String> = ports
            .iter()
            .skip(1)
            .map(|port| format!("node=127.0.0.1:{port}"))
            .collect();
        format!(
            "redis-cluster://127.0.0.1:{}?{}",
            ports.first().copied().unwrap_or(0),
            others.join("&")
        )
    }
}

/// The cli program (`redis-cli`, or what `HOLDLOCK_TEST_SERVER`/`HOLDLOCK_TEST_CLI` name).
pub fn cli_program() -> String {
    server::cli_program()
}

/// Runs `redis-cli --cluster <args>`: its output, or an error with it.
pub fn redis_cli_cluster(args: &[&str]) -> Result<String, BoxError> {
    Ok(server::redis_cli_cluster(args)?)
}

/// A bulk string reply (`INFO`, `CLUSTER INFO`, `CLUSTER NODES`) of the Redis on
/// loopback `port`, or `None`.
pub fn bulk(port: u16, args: &[&str]) -> Option<String> {
    server::bulk(port, args)
}

/// A PostgreSQL to use: one given by the user, or a throwaway one of our own.
#[derive(Debug)]
pub struct Database {
    config: String,
    throwaway: Option<postgres::Postgres>,
}

impl Database {
    /// Uses `explicit` (a URL or a key-value connection string), else `DATABASE_URL`,
    /// else starts a throwaway PostgreSQL.
    pub fn from_url_or_env_or_start(explicit: Option<String>) -> Result<Self, BoxError> {
        let given = explicit.or_else(|| {
            std::env::var("DATABASE_URL")
                .ok()
                .filter(|url| !url.is_empty())
        });
        match given {
            Some(config) => Ok(Database {
                config,
                throwaway: None,
            }),
            None => Self::start(),
        }
    }

    /// Starts a throwaway PostgreSQL (`initdb` and `postgres` on loopback; see
    /// `tests/common/postgres.rs`) whatever `DATABASE_URL` says; it is stopped, by its
    /// PID, when this is dropped or the example exits.
    pub fn start() -> Result<Self, BoxError> {
        let server = postgres::Postgres::start()?;
        Ok(Database {
            config: server.config(),
            throwaway: Some(server),
        })
    }

    /// The connection string, for `tokio_postgres::connect`.
    pub fn config(&self) -> &str {
        &self.config
    }

    /// The throwaway server's URL, for a second instance (`None` for one given).
    pub fn url(&self) -> Option<String> {
        self.throwaway.as_ref().map(postgres::Postgres::url)
    }

    /// Whether this is a server we started (and will stop) ourselves.
    pub fn is_throwaway(&self) -> bool {
        self.throwaway.is_some()
    }
}
