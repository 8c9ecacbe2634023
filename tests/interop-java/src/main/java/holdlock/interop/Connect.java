// Redisson's configuration from a holdlock test URL, shared by Peer (tests/
// redisson_java_interop.rs) and ChaosWorker (examples/chaos's Java workers).
package holdlock.interop;

import java.net.URI;
import java.util.ArrayList;
import java.util.List;

import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;
import org.redisson.config.ReadMode;
import org.redisson.config.ShardedSubscriptionMode;
import org.redisson.config.SingleServerConfig;

final class Connect {
    private Connect() {}

    /**
     * Redisson's configuration for the URL, with a small pool (a few threads):
     * redis://host:port (useSingleServer), or redis-cluster://host:port?node=host:port&...
     * (useClusterServers).
     */
    static Config config(String url, long watchdogMs) {
        Config config = new Config();
        config.setLockWatchdogTimeout(watchdogMs);
        config.setThreads(4);
        config.setNettyThreads(4);
        URI uri = URI.create(url);
        switch (uri.getScheme()) {
            case "redis": {
                SingleServerConfig server = config.useSingleServer();
                server.setAddress("redis://" + uri.getHost() + ":" + uri.getPort());
                server.setConnectionMinimumIdleSize(2);
                server.setConnectionPoolSize(16);
                server.setSubscriptionConnectionMinimumIdleSize(1);
                break;
            }
            case "redis-cluster": {
                List<String> nodes = new ArrayList<>();
                nodes.add("redis://" + uri.getHost() + ":" + uri.getPort());
                if (uri.getQuery() != null) {
                    for (String pair : uri.getQuery().split("&")) {
                        if (pair.startsWith("node=")) {
                            nodes.add("redis://" + pair.substring("node=".length()));
                        }
                    }
                }
                ClusterServersConfig cluster = config.useClusterServers();
                cluster.addNodeAddress(nodes.toArray(new String[0]));
                // The default, said here: SSUBSCRIBE and SPUBLISH where the cluster
                // has them (Redis 7).
                cluster.setShardedSubscriptionMode(ShardedSubscriptionMode.AUTO);
                cluster.setReadMode(ReadMode.MASTER);
                cluster.setMasterConnectionMinimumIdleSize(2);
                cluster.setMasterConnectionPoolSize(16);
                cluster.setSubscriptionConnectionMinimumIdleSize(1);
                break;
            }
            default:
                throw new IllegalArgumentException("not a redis:// or redis-cluster:// URL: " + url);
        }
        return config;
    }
}
