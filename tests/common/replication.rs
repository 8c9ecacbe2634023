//! Restarts and replication: a server restarted on the same port (its memory lost),
//! a replica of a server, and promoting a replica to master.

use std::time::{Duration, Instant};

use super::RedisServer;

impl RedisServer {
    /// Restarts redis-server on the same port with the same arguments. Without
    /// persistence (the harness passes `--save "" --appendonly no`) every key is lost.
    /// Returns once the new process answers; panics if it does not within 5 s.
    pub fn restart(&mut self) {
        self.restart_after(Duration::ZERO);
    }

    /// Like [`restart`](Self::restart), with the server down for `down` in between (a
    /// restart that takes time: a host rebooting, a big dataset loading).
    pub fn restart_after(&mut self, down: Duration) {
        self.process
            .restart(down, down + Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Starts a replica of this server and waits until its link is up and it has
    /// caught up with every write made so far. The replica loads the master's data
    /// straight from the socket: a replica that saved it as `dump.rdb` in the current
    /// directory would have every later test server load that file at startup.
    pub fn start_replica(&self) -> RedisServer {
        // Stream the first sync at once instead of waiting 5 s for more replicas.
        assert_eq!(
            self.command(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"])
                .as_deref(),
            Ok("+OK")
        );
        let master = self.port.to_string();
        let replica = RedisServer::start_with(move |_| {
            ["--replicaof", "127.0.0.1", &master]
                .into_iter()
                .chain(["--repl-diskless-load", "on-empty-db"])
                .map(String::from)
                .collect()
        });
        let start = Instant::now();
        while replica.info("master_link_status").as_deref() != Some("up") {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "replication never came up"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        self.wait_replicated(&replica);
        replica
    }

    /// Waits until `replica` has applied everything this master has written so far
    /// (comparing replication offsets; panics after 5 s).
    pub fn wait_replicated(&self, replica: &RedisServer) {
        let offset = |server: &RedisServer, field: &str| -> i64 {
            server
                .info(field)
                .and_then(|value| value.parse().ok())
                .unwrap_or(-1)
        };
        let target = offset(self, "master_repl_offset");
        let start = Instant::now();
        while offset(replica, "slave_repl_offset") < target {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "the replica did not catch up"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Turns a replica into a master (`REPLICAOF NO ONE`): from now on nothing the
    /// old master writes reaches it.
    pub fn promote(&self) {
        assert_eq!(
            self.command(&["REPLICAOF", "NO", "ONE"]).as_deref(),
            Ok("+OK")
        );
        assert_eq!(self.info("role").as_deref(), Some("master"));
    }

    /// One field of `INFO` (e.g. `role`, `master_repl_offset`), if present.
    pub fn info(&self, field: &str) -> Option<String> {
        super::server::info(self.port, field)
    }

    /// The redis-server's process id (changes with every restart).
    pub fn process_id(&self) -> u32 {
        self.info("process_id")
            .and_then(|pid| pid.parse().ok())
            .expect("INFO process_id")
    }
}
