//! What the bench reads of the servers themselves: the scripts they ran, their keys,
//! their CPU time. Each is a server-wide count, summed over every primary of a cluster
//! (a command sent with no key reaches one node of it), so run the bench on otherwise
//! idle servers.

use std::time::Duration;

use fred::clients::{Client, WithOptions};
use fred::interfaces::{ClientLike, ClusterInterface, ServerInterface};
use fred::types::InfoKind;
use fred::types::config::Options;

use super::BenchResult;

/// The scripts the server has run so far (see [`count_scripts`]); on a cluster, every
/// primary's summed.
pub(super) async fn script_calls(redis: &Client) -> BenchResult<u64> {
    let mut scripts = 0;
    for node in each_primary(redis)? {
        let stats: String = node.info(Some(InfoKind::CommandStats)).await?;
        scripts += count_scripts(&stats);
    }
    Ok(scripts)
}

/// `redis` as it sends to each primary in turn: the server itself on a single server,
/// every primary of the routing table on a cluster (so that a server-wide count, of
/// scripts, keys or CPU time, covers the whole cluster, not the node one command
/// happens to reach).
///
/// # Errors
///
/// A cluster whose routing table the client does not know.
fn each_primary(redis: &Client) -> BenchResult<Vec<WithOptions<Client>>> {
    if !redis.is_clustered() {
        return Ok(vec![redis.with_options(&Options::default())]);
    }
    let primaries = redis
        .cached_cluster_state()
        .map(|state| state.unique_primary_nodes())
        .unwrap_or_default();
    if primaries.is_empty() {
        return Err("the cluster's primaries are not known".into());
    }
    Ok(primaries
        .into_iter()
        .map(|primary| redis.with_cluster_node(primary))
        .collect())
}

/// The calls of `EVAL`, `EVALSHA` and `FCALL` (and their read-only forms) in the text
/// of `INFO commandstats`.
fn count_scripts(stats: &str) -> u64 {
    const SCRIPTS: [&str; 6] = [
        "eval",
        "evalsha",
        "eval_ro",
        "evalsha_ro",
        "fcall",
        "fcall_ro",
    ];
    stats
        .lines()
        .filter_map(|line| {
            let (command, fields) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
            if !SCRIPTS.contains(&command) {
                return None;
            }
            let calls = fields
                .split(',')
                .find_map(|field| field.strip_prefix("calls="));
            calls?.parse::<u64>().ok()
        })
        .sum()
}

/// How many keys the servers hold (`DBSIZE`).
pub(super) async fn key_count(redis: &Client) -> BenchResult<u64> {
    let mut keys = 0;
    for node in each_primary(redis)? {
        keys += node.dbsize::<u64>().await?;
    }
    Ok(keys)
}

/// The server's CPU time so far (`used_cpu_sys` + `used_cpu_user` of `INFO cpu`; on a
/// cluster, every primary's summed), or `None` if it cannot be read.
pub(super) async fn redis_cpu(redis: &Client) -> Option<Duration> {
    let mut total = 0.0;
    for node in each_primary(redis).ok()? {
        let info: String = node.info(Some(InfoKind::Cpu)).await.ok()?;
        let seconds = |field: &str| -> Option<f64> {
            let line = info.lines().find(|line| line.starts_with(field))?;
            line.split_once(':')?.1.trim().parse().ok()
        };
        total += seconds("used_cpu_sys:")? + seconds("used_cpu_user:")?;
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    #[test]
    fn script_calls_are_read_from_commandstats() {
        let stats = "# Commandstats\r\n\
            cmdstat_get:calls=7,usec=3,usec_per_call=0.43,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_evalsha:calls=120,usec=900,usec_per_call=7.50,rejected_calls=0,failed_calls=2\r\n\
            cmdstat_eval:calls=3,usec=40,usec_per_call=13.33,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_fcall:calls=5,usec=10,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_evalsha_ro:calls=1,usec=1,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_script|load:calls=9,usec=99,usec_per_call=11.00,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(super::count_scripts(stats), 129);
        assert_eq!(super::count_scripts(""), 0);
    }
}
