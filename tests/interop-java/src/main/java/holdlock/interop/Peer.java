// A Redisson peer for tests/redisson_java_interop.rs: Java Redisson itself, taking its
// RLock, RFencedLock, RFairLock and RReadWriteLock, and the permits of its
// RPermitExpirableSemaphore, on command, as tests/interop/peer.js does with
// node-redisson.
//
//   java -jar target/redisson-peer.jar <redis url> <watchdog timeout ms> [<fair wait ms>]
//
// <redis url> is redis://host:port (useSingleServer) or a cluster URL as holdlock's
// tests write it, redis-cluster://host:port?node=host:port&node=... (useClusterServers,
// shardedSubscriptionMode AUTO: shard channels on a Redis 7 cluster). <fair wait ms>
// sets Redisson's fairLockWaitTimeout (5 minutes unless given). Once connected the
// peer says "ready <publish command>" ("publish" or "spublish", the command its unlock
// script publishes with). Before that it takes a lock and a fair lock of its own,
// each through a wait and a wake-up, a fenced lock, and a read and a write lock, so that
// the wake-ups a test times are not slowed by the JVM loading the classes of Redisson's
// first release message.
//
// Commands are read from stdin, one a line; each starts with an id that its answer
// repeats. <thread> names a Java thread of this process, started on first use: the
// commands of one thread run on it in order (a thread blocked in lock() takes no other
// command until it returns), those of different threads at once. A lock's owner is
// that thread, as in any Java service: "<this Redisson's id>:<Thread.getId()>", and
// for a write lock "<this Redisson's id>:<Thread.getId()>:write".
//
//   <id> lock <name> <thread>              -> <id> locked <epoch ms> <owner id>
//   <id> trylock <name> <thread> <wait ms> -> <id> trylock <true|false> <epoch ms>
//   <id> unlock <name> <thread>            -> <id> unlocked <epoch ms>
//   <id> count <name> <thread> <counter> <n> <inside ms>
//        n critical sections {lock; GET counter; wait; SET counter + 1; unlock}
//                                          -> <id> counted <n>
//   <id> fenced <name> <thread>            -> <id> fenced <token> <epoch ms> <owner id>
//        RFencedLock.lockAndGetToken()
//   <id> fencedcount <name> <thread> <list> <n>
//        n times {lockAndGetToken; RPUSH list "java:<token>"; unlock}
//                                          -> <id> fencedcounted <n>
//   <id> rlock <name> <thread>             -> <id> locked <epoch ms> <owner id>
//        RReadWriteLock.readLock().lock()
//   <id> wlock <name> <thread>             -> <id> locked <epoch ms> <owner id>
//        RReadWriteLock.writeLock().lock()
//   <id> tryrlock <name> <thread> <wait ms> -> <id> trylock <true|false> <epoch ms>
//   <id> trywlock <name> <thread> <wait ms> -> <id> trylock <true|false> <epoch ms>
//   <id> rwcount <name> <thread> <counter> <n> <inside ms>
//        n critical sections {wlock; GET counter; wait; SET counter + 1; unlock}
//                                          -> <id> counted <n>
//   <id> flock <name> <thread>             -> <id> locked <epoch ms> <owner id>
//        RFairLock.lock()
//   <id> tryflock <name> <thread> <wait ms> -> <id> trylock <true|false> <epoch ms>
//   <id> fcount <name> <thread> <counter> <n> <inside ms>
//        n critical sections {flock; GET counter; wait; SET counter + 1; unlock}
//                                          -> <id> counted <n>
//
// The p commands take the permits of the RPermitExpirableSemaphore <name>; a permit is
// the id acquire returns, not the thread's, and expires after its lease unless released.
//
//   <id> psetpermits <name> <thread> <n>   -> <id> setpermits <true|false>
//        trySetPermits(n)
//   <id> pacquire <name> <thread> <lease ms> -> <id> acquired <epoch ms> <permit id>
//        acquire(lease, MILLISECONDS): waits for a permit
//   <id> ptryacquire <name> <thread> <wait ms> <lease ms>
//                                          -> <id> tryacquired <permit id|none> <epoch ms>
//        tryAcquire(wait, lease, MILLISECONDS)
//   <id> prelease <name> <thread> <permit id> -> <id> released <true|false> <epoch ms>
//        tryRelease(permit id)
//   <id> pavailable <name> <thread>        -> <id> available <n>
//        availablePermits()
//   <id> pcount <name> <thread> <inside> <max> <n> <inside ms> <lease ms>
//        n times {acquire(lease); INCR inside; raise max to that; wait; DECR inside;
//        release}, inside and max as RAtomicLongs (plain integer strings)
//                                          -> <id> pcounted <n>
//
// The s commands take permits of the RSemaphore <name> (no ids, no leases):
//
//   <id> ssetpermits <name> <thread> <n>   -> <id> setpermits <true|false>
//        trySetPermits(n)
//   <id> sacquire <name> <thread>          -> <id> sacquired <epoch ms>
//        acquire(): waits for a permit, kept until released
//
// "unlock" releases with the object the thread last took the name with and has not
// released yet (RLock, RFencedLock, RFairLock, or the read or write lock of an RReadWriteLock:
// a thread holding a name's write lock may take its read lock too), or else with the
// name's RLock. A failed command answers "<id> error <message>". End of input shuts
// Redisson down and exits.
package holdlock.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RAtomicLong;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

public final class Peer {
    private static RedissonClient redisson;
    /** The threads commands run on, by the name the commands give them. */
    private static final Map<String, ExecutorService> THREADS = new ConcurrentHashMap<>();
    /** The objects each thread took each name with, the latest first, for "unlock". */
    private static final Map<String, Deque<RLock>> TAKEN = new ConcurrentHashMap<>();

    private Peer() {}

    public static void main(String[] args) throws Exception {
        // Redisson logs through slf4j-simple, which writes to stderr: warnings only.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        if (args.length != 2 && args.length != 3) {
            System.err.println(
                "usage: java -jar redisson-peer.jar <redis url> <watchdog ms> [<fair wait ms>]");
            System.exit(2);
        }
        Config config = Connect.config(args[0], Long.parseLong(args[1]));
        if (args.length > 2) {
            config.setFairLockWaitTimeout(Long.parseLong(args[2]));
        }
        redisson = Redisson.create(config);
        String publish = ((Redisson) redisson).getCommandExecutor().getConnectionManager()
                .getSubscribeService().getPublishCommand();
        Connect.warmUp(redisson);
        say("ready", publish);

        BufferedReader input = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = input.readLine()) != null; ) {
            String[] words = line.trim().split("\\s+");
            if (words.length < 2) {
                continue;
            }
            String id = words[0];
            String verb = words[1];
            List<String> rest = List.of(words).subList(2, words.length);
            if (rest.size() < 2) {
                say(id, "error", "every command names a lock and a thread");
                continue;
            }
            THREADS.computeIfAbsent(rest.get(1), thread -> Connect.thread("peer-thread-" + thread)).execute(() -> {
                try {
                    say(id, String.join(" ", run(verb, rest)));
                } catch (Throwable error) {
                    say(id, "error", String.valueOf(error).replaceAll("\\s+", " "));
                }
            });
        }
        redisson.shutdown();
        System.exit(0);
    }

    /** Runs one command on the calling thread; returns the words of its answer. */
    private static String run(String verb, List<String> args) throws InterruptedException {
        String name = args.get(0);
        String taken = args.get(1) + " " + name;
        switch (verb) {
            case "lock":
            case "rlock":
            case "wlock":
            case "flock": {
                RLock lock = lock(verb, name);
                lock.lock();
                took(taken, lock);
                return words("locked", now(), owner() + (verb.equals("wlock") ? ":write" : ""));
            }
            case "trylock":
            case "tryrlock":
            case "trywlock":
            case "tryflock": {
                RLock lock = lock(verb, name);
                boolean got = lock.tryLock(Long.parseLong(args.get(2)), TimeUnit.MILLISECONDS);
                if (got) {
                    took(taken, lock);
                }
                return words("trylock", got, now());
            }
            case "unlock": {
                RLock lock = TAKEN.computeIfAbsent(taken, key -> new ArrayDeque<>()).pollFirst();
                (lock == null ? redisson.getLock(name) : lock).unlock();
                return words("unlocked", now());
            }
            case "count":
            case "rwcount":
            case "fcount": {
                String counter = args.get(2);
                int n = Integer.parseInt(args.get(3));
                long insideMs = Long.parseLong(args.get(4));
                RLock lock = lock(verb, name);
                var value = redisson.<String>getBucket(counter, StringCodec.INSTANCE);
                for (int i = 0; i < n; i++) {
                    lock.lock();
                    try {
                        String before = value.get();
                        Thread.sleep(insideMs);
                        value.set(String.valueOf((before == null ? 0 : Long.parseLong(before)) + 1));
                    } finally {
                        lock.unlock();
                    }
                }
                return words("counted", n);
            }
            case "fenced": {
                RFencedLock lock = redisson.getFencedLock(name);
                Long token = lock.lockAndGetToken();
                took(taken, lock);
                return words("fenced", token, now(), owner());
            }
            case "fencedcount": {
                RFencedLock lock = redisson.getFencedLock(name);
                var list = redisson.<String>getList(args.get(2), StringCodec.INSTANCE);
                int n = Integer.parseInt(args.get(3));
                for (int i = 0; i < n; i++) {
                    Long token = lock.lockAndGetToken();
                    try {
                        list.add("java:" + token);
                    } finally {
                        lock.unlock();
                    }
                }
                return words("fencedcounted", n);
            }
            case "psetpermits":
                return words("setpermits", semaphore(name).trySetPermits(Integer.parseInt(args.get(2))));
            case "pacquire": {
                String permit = semaphore(name).acquire(Long.parseLong(args.get(2)), TimeUnit.MILLISECONDS);
                return words("acquired", now(), permit);
            }
            case "ptryacquire": {
                String permit = semaphore(name).tryAcquire(Long.parseLong(args.get(2)),
                        Long.parseLong(args.get(3)), TimeUnit.MILLISECONDS);
                return words("tryacquired", permit == null ? "none" : permit, now());
            }
            case "prelease": {
                boolean released = semaphore(name).tryRelease(args.get(2));
                return words("released", released, now());
            }
            case "ssetpermits":
                return words("setpermits", redisson.getSemaphore(name).trySetPermits(Integer.parseInt(args.get(2))));
            case "sacquire": {
                redisson.getSemaphore(name).acquire();
                return words("sacquired", now());
            }
            case "pavailable":
                return words("available", semaphore(name).availablePermits());
            case "pcount": {
                RPermitExpirableSemaphore semaphore = semaphore(name);
                RAtomicLong inside = redisson.getAtomicLong(args.get(2));
                RAtomicLong max = redisson.getAtomicLong(args.get(3));
                int n = Integer.parseInt(args.get(4));
                long insideMs = Long.parseLong(args.get(5));
                long leaseMs = Long.parseLong(args.get(6));
                for (int i = 0; i < n; i++) {
                    String permit = semaphore.acquire(leaseMs, TimeUnit.MILLISECONDS);
                    try {
                        long now = inside.incrementAndGet();
                        for (long was = max.get(); now > was && !max.compareAndSet(was, now); was = max.get()) {
                        }
                        Thread.sleep(insideMs);
                        inside.decrementAndGet();
                    } finally {
                        semaphore.release(permit);
                    }
                }
                return words("pcounted", n);
            }
            default:
                throw new IllegalArgumentException("unknown command " + verb);
        }
    }

    /** The lock a command takes: the name's RLock, or its read or write lock. */
    private static RLock lock(String verb, String name) {
        switch (verb) {
            case "rlock":
            case "tryrlock":
                return redisson.getReadWriteLock(name).readLock();
            case "wlock":
            case "trywlock":
            case "rwcount":
                return redisson.getReadWriteLock(name).writeLock();
            case "flock":
            case "tryflock":
            case "fcount":
                return redisson.getFairLock(name);
            default:
                return redisson.getLock(name);
        }
    }

    private static RPermitExpirableSemaphore semaphore(String name) {
        return redisson.getPermitExpirableSemaphore(name);
    }

    /** Notes that the calling thread took a name with the lock, for "unlock". */
    private static void took(String taken, RLock lock) {
        TAKEN.computeIfAbsent(taken, key -> new ArrayDeque<>()).push(lock);
    }

    /** The owner id Redisson gives a lock taken by the calling thread. */
    private static String owner() {
        String id = ((Redisson) redisson).getCommandExecutor().getConnectionManager()
                .getServiceManager().getId();
        return id + ":" + Thread.currentThread().getId();
    }

    private static long now() {
        return System.currentTimeMillis();
    }

    private static String words(Object... words) {
        StringBuilder line = new StringBuilder();
        for (Object word : words) {
            if (line.length() > 0) {
                line.append(' ');
            }
            line.append(word);
        }
        return line.toString();
    }

    private static synchronized void say(String... words) {
        System.out.println(String.join(" ", words));
        System.out.flush();
    }
}
