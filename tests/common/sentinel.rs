//! Redis Sentinel on loopback: one master, one replica, three sentinels watching them,
//! and a forced failover.

use std::time::{Duration, Instant};

use super::RedisServer;

/// The name the sentinels know the master by.
pub const SERVICE: &str = "holdlock";

/// A master, its replica, and three sentinels, all stopped when dropped.
pub struct Sentinels {
    pub master: RedisServer,
    pub replica: RedisServer,
    pub sentinels: Vec<RedisServer>,
}

impl Sentinels {
    /// Starts the deployment and waits until every sentinel knows the replica.
    pub fn start() -> Self {
        let master = RedisServer::start();
        let replica = master.start_streaming_replica();
        let (bin, sentinel_args) = super::server::sentinel_program();
        let master_port = master.port;
        let sentinels: Vec<RedisServer> = (0..3)
            .map(|_| {
                RedisServer::start_program(
                    &bin,
                    |port| {
                        let mut args = vec![sentinel_config(port, master_port)];
                        args.extend(sentinel_args.iter().cloned());
                        args
                    },
                    |_| Vec::new(),
                )
            })
            .collect();
        let deployment = Self {
            master,
            replica,
            sentinels,
        };
        let start = Instant::now();
        for sentinel in &deployment.sentinels {
            // An array of one replica (the harness reads only the header line).
            while sentinel
                .query(&["SENTINEL", "REPLICAS", SERVICE])
                .as_deref()
                != Ok("*1")
            {
                assert!(
                    start.elapsed() < Duration::from_secs(15),
                    "the sentinels never found the replica"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        deployment
    }

    /// The fred URL: every sentinel, and the service name.
    pub fn url(&self) -> String {
        let (first, rest) = self.sentinels.split_first().unwrap();
        let mut url = format!(
            "redis-sentinel://127.0.0.1:{}?sentinelServiceName={SERVICE}",
            first.port
        );
        for sentinel in rest {
            url.push_str(&format!("&node=127.0.0.1:{}", sentinel.port));
        }
        url
    }

    /// The master's port as the sentinel at `index` reports it.
    pub fn master_port(&self, index: usize) -> Option<u16> {
        let raw = self.sentinels[index]
            .array(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE])
            .ok()?;
        raw.get(1)?.parse().ok()
    }

    /// Forces a failover: [`promote`](Self::promote) then
    /// [`retire_old_master`](Self::retire_old_master). Returns the new master.
    pub fn failover(&self) -> &RedisServer {
        self.promote();
        self.retire_old_master();
        &self.replica
    }

    /// `SENTINEL FAILOVER`, and waits until every sentinel names the replica as master.
    /// The old master does not know yet: clients still connected to it go on writing
    /// there, and those writes are lost.
    pub fn promote(&self) {
        let start = Instant::now();
        loop {
            let reply = self.sentinels[0].query(&["SENTINEL", "FAILOVER", SERVICE]);
            // A sentinel that has not yet had the replica's own INFO reply (it learns
            // of the replica from the master's) finds "no suitable replica".
            if reply
                .as_deref()
                .is_ok_and(|reply| reply.starts_with("-NOGOODSLAVE"))
                && start.elapsed() < Duration::from_secs(15)
            {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            assert_eq!(reply.as_deref(), Ok("+OK"));
            break;
        }
        let start = Instant::now();
        let promoted = self.replica.port;
        while (0..self.sentinels.len()).any(|i| self.master_port(i) != Some(promoted)) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the failover did not complete"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Turns the old master into a replica of the new one and disconnects its clients:
    /// the steps a sentinel takes itself once the old master has gone on claiming its
    /// role for 8 s (four hello periods). It loads the new master's data straight from
    /// the socket: saved as `dump.rdb` in the current directory, that data would be
    /// loaded by every later test server at startup.
    pub fn retire_old_master(&self) {
        let port = self.replica.port.to_string();
        for command in [
            &["CONFIG", "SET", "repl-diskless-load", "swapdb"][..],
            &["REPLICAOF", "127.0.0.1", &port],
            &["CLIENT", "KILL", "TYPE", "normal"],
            &["CLIENT", "KILL", "TYPE", "pubsub"],
        ] {
            assert!(
                self.master
                    .command(command)
                    .is_ok_and(|reply| !reply.starts_with('-'))
            );
        }
    }
}

/// Writes a sentinel config file (sentinels rewrite their own) and returns its path.
fn sentinel_config(port: u16, master_port: u16) -> String {
    let path = std::env::temp_dir().join(format!(
        "holdlock-sentinel-{port}-{}.conf",
        uuid::Uuid::new_v4().simple()
    ));
    let config = format!(
        "sentinel monitor {SERVICE} 127.0.0.1 {master_port} 2\n\
         sentinel down-after-milliseconds {SERVICE} 1000\n\
         sentinel failover-timeout {SERVICE} 10000\n\
         sentinel parallel-syncs {SERVICE} 1\n"
    );
    std::fs::write(&path, config).expect("write a sentinel config");
    path.to_str().unwrap().to_owned()
}

impl RedisServer {
    /// [`start_replica`](Self::start_replica), and then waits until a write reaches it.
    /// A replica that loaded its first sync from the socket is sent the write stream
    /// only after its first `REPLCONF ACK` (up to a second later); until then nothing
    /// written reaches it and `WAIT` cannot count it.
    pub fn start_streaming_replica(&self) -> RedisServer {
        let replica = self.start_replica();
        assert_eq!(
            self.command(&["SET", "holdlock-test:warm-up", "1"])
                .as_deref(),
            Ok("+OK")
        );
        self.wait_replicated(&replica);
        replica
    }
}
