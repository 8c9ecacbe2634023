// Redisson's configuration from a holdlock test URL, and a warm-up of the client,
// shared by Peer (tests/redisson_java_interop.rs) and ChaosWorker (examples/chaos's
// Java workers).
package holdlock.interop;

import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RedissonClient;

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

    /**
     * Takes a lock and a fair lock of its own, each through a wait and a wake-up, a
     * fenced lock, and a read and a write lock, so that the calls timed afterwards are
     * not slowed by the JVM loading the classes of Redisson's first release message
     * and first scripts. Leaves nothing behind, even when a call fails (the keys
     * deleted, a watchdog still running on one finds it gone and stops).
     */
    static void warmUp(RedissonClient redisson) throws Exception {
        String name = "holdlock-interop-warm-up:" + UUID.randomUUID();
        try {
            warmUp(redisson, name);
        } catch (Exception error) {
            try {
                redisson.getKeys().deleteByPattern("*" + name + "*");
            } catch (Exception ignored) {
                // The first error says more.
            }
            throw error;
        }
    }

    private static void warmUp(RedissonClient redisson, String name) throws Exception {
        wakeUpOnce(redisson.getLock(name));
        // RFairLock's waiter is woken on a channel of its own.
        wakeUpOnce(redisson.getFairLock(name + ":fair"));
        RFencedLock fenced = redisson.getFencedLock(name);
        fenced.lockAndGetToken();
        fenced.unlock();
        // Its token counter (RedissonFencedLock's prefixName).
        redisson.getBucket("redisson_lock_token:{" + name + "}").delete();
        // The last unlock of each deletes the hash.
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        rw.readLock().lock();
        rw.readLock().unlock();
        rw.writeLock().lock();
        rw.writeLock().unlock();
    }

    /** A thread waits for `lock` while another holds it, and is woken by its release. */
    private static void wakeUpOnce(RLock lock) throws Exception {
        ExecutorService holder = thread("warm-up-holder");
        ExecutorService waiter = thread("warm-up-waiter");
        try {
            holder.submit(() -> lock.lock()).get(30, TimeUnit.SECONDS);
            Future<?> woken = waiter.submit(() -> {
                lock.lock();
                lock.unlock();
            });
            Thread.sleep(200);
            holder.submit(() -> lock.unlock()).get(30, TimeUnit.SECONDS);
            woken.get(30, TimeUnit.SECONDS);
        } finally {
            holder.shutdownNow();
            waiter.shutdownNow();
        }
    }

    /** A single daemon thread named `name`, as an executor. */
    static ExecutorService thread(String name) {
        return Executors.newSingleThreadExecutor(task -> {
            Thread thread = new Thread(task, name);
            thread.setDaemon(true);
            return thread;
        });
    }
}
