// A Java worker for examples/chaos: Java Redisson itself, as an ordinary service uses
// it, taking locks on the names the Rust workers (holdlock in Redisson's layout) take,
// and doing fenced read-modify-writes under them, as examples/chaos/worker.rs does.
//
//   java -cp target/redisson-peer.jar holdlock.interop.ChaosWorker --lock-url <url>
//        --resource-url <url> --lock <kind> [--names 4] [--tasks 4] [--lease 1000ms]
//        [--seed 1] [--fair-wait 2000ms] [--fence-script <path>] [--deadlock-check <d>]
//
// --lock-url is redis://host:port or redis-cluster://host:port?node=host:port&...
// (Connect.config); --resource-url a redis://host:port, for the registers. Durations
// are <digits><unit>, unit ms, s, m or h. --lease is Redisson's lockWatchdogTimeout
// (and a semaphore permit's lease), --fair-wait its fairLockWaitTimeout and the wait of
// every fair call. --deadlock-check is accepted and ignored (Redisson has none).
// <kind> is one of
//
//   redisson       RFencedLock.tryLockAndGetToken(wait): a fenced read of the register
//                  register:{<name>} (EVAL of --fence-script, holdlock's lua/fence.lua,
//                  on the resource server), a pause, one round in five a nested
//                  tryLock() on the same thread, a fenced write of the value + 1
//   redisson-rw    RReadWriteLock: its read lock three rounds in four, else its write lock
//   redisson-fair  RFairLock.tryLock(fair wait); a call that ends without the lock is
//                  followed at once by another on the same name
//   redisson-sem   RPermitExpirableSemaphore of 2 permits (trySetPermits at start):
//                  tryAcquire(wait, lease)
//
// on the names chaos:0 .. chaos:<names - 1>, from --tasks threads (each thread one
// Redisson owner for its whole life), until stdin closes; then each thread finishes
// its round, both clients shut down, and the worker exits 0 (2 on a bad command line,
// 1 when it cannot start).
//
// Stdout is the history, one JSON object a line, as examples/chaos/history.rs reads
// it; t is CLOCK_MONOTONIC in microseconds, a the attempt ((task << 32) + n):
//
//   {"op":"ready","t":T,"java":true}                  connected, before any task
//   {"op":"start","t":T,"a":A,"name":N,"wait_ms":W}   before a lock call, with
//        "shared":true (a read lock), "permits":2 (a permit), "fifo":true (a fair lock)
//   {"op":"grant","t":T,"a":A,"token":K}              K the fencing token, else 0
//   {"op":"busy","t":T,"a":A}                         the wait ran out
//   {"op":"error","t":T,"a":A,"error":E}              the call threw
//   {"op":"nested","t":T,"a":A,"count":C}             a re-entry (C = 0: refused;
//        "error":E if it threw)
//   {"op":"read","t":T,"a":A,"outcome":O}             O ok, stale or unknown
//   {"op":"write","t":T,"a":A,"value":V,"outcome":O}
//   {"op":"unlock","t":T,"a":A}                       before the release
//   {"op":"unlocked","t":T,"a":A,"released":R}        R ok, not_held or error
//        (error: it threw, or did not answer within 5 s)
//   {"op":"done","t":T}                               last
//
// Nothing else goes to stdout. Redisson's logging is off unless HOLDLOCK_CHAOS_JAVA_LOG
// is set (to a level of slf4j-simple, trace to error; warn for any other value): it
// goes to stderr, which is the nemesis's terminal.
package holdlock.interop;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.redisson.Redisson;
import org.redisson.api.RFencedLock;
import org.redisson.api.RFuture;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RScript;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.BaseConfig;
import org.redisson.config.Config;
import org.redisson.config.EqualJitterDelay;

public final class ChaosWorker {
    /** The permits of each name's semaphore (examples/chaos/worker.rs's PERMITS). */
    private static final int PERMITS = 2;
    /** How long a release may take before it is recorded as an error. */
    private static final long RELEASE_BOUND_S = 5;
    /** The longest error text an op carries. */
    private static final int ERROR_CHARS = 300;
    private static final Set<String> KINDS =
        Set.of("redisson", "redisson-rw", "redisson-fair", "redisson-sem");
    private static final Set<String> FLAGS = Set.of("lock-url", "resource-url", "names",
        "tasks", "lease", "seed", "lock", "fair-wait", "fence-script", "deadlock-check");
    private static final Set<String> LOG_LEVELS = Set.of("trace", "debug", "info", "warn", "error");

    /** The history: the real stdout (System.out is pointed at stderr). */
    private static PrintStream out;

    private static String kind;
    private static int names;
    private static long leaseMs;
    private static long fairWaitMs;
    private static String fenceScript;
    private static RedissonClient redisson;
    private static RedissonClient resource;
    private static volatile boolean stop;

    private ChaosWorker() {}

    public static void main(String[] args) throws Exception {
        // Before any logger is made: Redisson logs a lot under faults.
        String log = System.getenv("HOLDLOCK_CHAOS_JAVA_LOG");
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
            log == null ? "off" : LOG_LEVELS.contains(log) ? log : "warn");
        out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out)),
            false, StandardCharsets.UTF_8);
        System.setOut(System.err);

        Map<String, String> flags = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || !FLAGS.contains(args[i].substring(2))) {
                usage("unknown option " + args[i]);
            }
            if (i + 1 >= args.length) {
                usage(args[i] + " needs a value");
            }
            flags.put(args[i].substring(2), args[i + 1]);
        }
        String lockUrl = required(flags, "lock-url");
        String resourceUrl = required(flags, "resource-url");
        kind = required(flags, "lock");
        if (!KINDS.contains(kind)) {
            usage("--lock: `" + kind + "` (redisson, redisson-rw, redisson-fair or redisson-sem)");
        }
        names = (int) number(flags, "names", 4, 1, Integer.MAX_VALUE);
        int tasks = (int) number(flags, "tasks", 4, 1, 1 << 16);
        long seed = 1;
        if (flags.containsKey("seed")) {
            try {
                seed = Long.parseUnsignedLong(flags.get("seed"));
            } catch (NumberFormatException error) {
                usage("--seed: `" + flags.get("seed") + "` is not a number");
            }
        }
        leaseMs = durationMs(flags, "lease", 1000);
        fairWaitMs = durationMs(flags, "fair-wait", 2000);
        durationMs(flags, "deadlock-check", 0);
        if (kind.equals("redisson")) {
            String path = flags.get("fence-script");
            if (path == null) {
                usage("--lock redisson needs --fence-script <holdlock's lua/fence.lua>");
            }
            try {
                fenceScript = Files.readString(Path.of(path));
            } catch (IOException error) {
                usage("--fence-script: " + error);
            }
        }

        // A fault may meet the start (a restart, a SCRIPT FLUSH under Redisson's cached
        // scripts, a partition): start again, for up to a minute.
        long giveUp = System.nanoTime() + TimeUnit.MINUTES.toNanos(1);
        while (true) {
            try {
                start(lockUrl, resourceUrl);
                break;
            } catch (Exception error) {
                for (RedissonClient client : new RedissonClient[] {redisson, resource}) {
                    if (client != null) {
                        client.shutdown();
                    }
                }
                if (System.nanoTime() - giveUp > 0) {
                    System.err.println("chaos worker (java): cannot start: " + error);
                    System.exit(1);
                }
                Thread.sleep(250);
            }
        }
        emit("ready", ",\"java\":true");

        List<Thread> threads = new ArrayList<>();
        for (int task = 0; task < tasks; task++) {
            Task body = new Task(task, new Random(seed ^ ((long) task << 40)));
            Thread thread = new Thread(body, "chaos-task-" + task);
            thread.start();
            threads.add(thread);
        }
        InputStream in = System.in;
        byte[] sink = new byte[64];
        try {
            while (in.read(sink) >= 0) {
            }
        } catch (IOException error) {
            // As end of input.
        }
        stop = true;
        for (Thread thread : threads) {
            thread.join();
        }
        redisson.shutdown();
        resource.shutdown();
        emit("done", "");
        System.exit(0);
    }

    /** Connects both clients and warms them up (see Connect.warmUp). */
    private static void start(String lockUrl, String resourceUrl) throws Exception {
        redisson = null;
        resource = null;
        Config locks = tuned(Connect.config(lockUrl, leaseMs));
        locks.setFairLockWaitTimeout(fairWaitMs);
        redisson = Redisson.create(locks);
        resource = Redisson.create(tuned(Connect.config(resourceUrl, leaseMs)));
        // A cold JVM's first calls reach Redis hundreds of milliseconds after their
        // start is recorded, which the fair check cannot tell from a call served out
        // of order: load the classes and scripts first.
        Connect.warmUp(redisson);
        if (kind.equals("redisson")) {
            String warm = "holdlock-chaos-warm-up:" + UUID.randomUUID();
            try {
                fence(warm, 1, null);
            } finally {
                resource.getKeys().delete(warm);
            }
        }
        if (kind.equals("redisson-sem")) {
            for (int k = 0; k < names; k++) {
                // false: set already, by another worker.
                redisson.getPermitExpirableSemaphore("chaos:" + k).trySetPermits(PERMITS);
            }
        }
    }

    /**
     * The settings of a Java service whose leases are about a second long: an answer
     * within a second, a short pause (100-200 ms) before each of Redisson's retries,
     * two seconds to connect; on a cluster, its topology looked at every second.
     */
    private static Config tuned(Config config) {
        BaseConfig<?> servers = config.isClusterConfig() ? config.useClusterServers() : config.useSingleServer();
        servers.setTimeout(1000);
        servers.setConnectTimeout(2000);
        // EqualJitterDelay(base, max) with base = max: max/2 plus up to max/2 at random.
        servers.setRetryDelay(new EqualJitterDelay(Duration.ofMillis(200), Duration.ofMillis(200)));
        if (config.isClusterConfig()) {
            config.useClusterServers().setScanInterval(1000);
        }
        return config;
    }

    /** One task: one thread, so one Redisson owner, for the worker's whole life. */
    private static final class Task implements Runnable {
        private final Random rng;
        private long nextAttempt;
        /** A fair call that ended without the lock: the next waits on its name at once. */
        private String rewait;

        Task(int task, Random rng) {
            this.rng = rng;
            this.nextAttempt = (long) task << 32;
        }

        @Override
        public void run() {
            while (!stop) {
                try {
                    switch (kind) {
                        case "redisson":
                            fencedRound();
                            break;
                        case "redisson-rw":
                            rwRound();
                            break;
                        case "redisson-fair":
                            fairRound();
                            break;
                        default:
                            semaphoreRound();
                            break;
                    }
                } catch (Throwable error) {
                    System.err.println("chaos worker (java): " + Thread.currentThread().getName() + ": " + error);
                }
                // Time outside the lock, so that others get a turn; none before a re-wait.
                if (rewait == null) {
                    sleepNanos(TimeUnit.MILLISECONDS.toNanos(rng.nextInt(5)));
                }
            }
        }

        private String randomName() {
            return "chaos:" + rng.nextInt(names);
        }

        private long randomWait() {
            return 200 + rng.nextInt(1800);
        }

        /** The hold of an unfenced round: mostly short, some past the lease. */
        private long unfencedHoldNanos() {
            return rng.nextInt(100) < 90
                ? TimeUnit.MILLISECONDS.toNanos(rng.nextInt(20))
                : pastTheLease();
        }

        private long pastTheLease() {
            return (long) (TimeUnit.MILLISECONDS.toNanos(leaseMs) * (1.2 + rng.nextDouble()));
        }

        /** RFencedLock: a fenced read-modify-write of the name's register under it. */
        private void fencedRound() {
            long a = nextAttempt++;
            String name = randomName();
            long wait = randomWait();
            start(a, name, wait, "");
            RFencedLock lock = redisson.getFencedLock(name);
            Long token;
            try {
                token = lock.tryLockAndGetToken(wait, TimeUnit.MILLISECONDS);
            } catch (Exception error) {
                failed(a, error);
                sleepNanos(TimeUnit.MILLISECONDS.toNanos(50));
                return;
            }
            if (token == null) {
                emit("busy", attempt(a));
                return;
            }
            emit("grant", attempt(a) + ",\"token\":" + token);
            work(a, name, lock, token);
            release(a, lock::unlockAsync);
        }

        /**
         * Under the lock: a fenced read, a pause, sometimes a nested take, a fenced
         * write of the value plus one, another pause (worker.rs's `work`).
         */
        private void work(long a, String name, RFencedLock lock, long token) {
            String register = "register:{" + name + "}";
            int pick = rng.nextInt(100);
            long hold = pick < 85 ? TimeUnit.MILLISECONDS.toNanos(rng.nextInt(15))
                : pick < 97 ? TimeUnit.MILLISECONDS.toNanos(50 + rng.nextInt(250))
                : pastTheLease();
            boolean nest = rng.nextInt(100) < 20;
            boolean innerFirst = rng.nextBoolean();
            Fenced read = fence(register, token, null);
            emit("read", attempt(a) + ",\"outcome\":\"" + read.outcome + "\"");
            if (!read.outcome.equals("ok")) {
                return;
            }
            long current = 0;
            if (read.value != null) {
                try {
                    current = Long.parseLong(read.value);
                } catch (NumberFormatException error) {
                    // As absent.
                }
            }
            sleepNanos(hold / 2);
            boolean nested = false;
            if (nest) {
                // Same thread, so the same owner: granted at once, one hold deeper.
                int count = 0;
                String failure = null;
                try {
                    nested = lock.tryLock();
                    if (nested) {
                        count = lock.getHoldCount();
                    }
                } catch (Exception error) {
                    failure = text(error);
                }
                emit("nested", attempt(a) + ",\"count\":" + count
                    + (failure == null ? "" : ",\"error\":" + quote(failure)));
            }
            long value = current + 1;
            Fenced written = fence(register, token, String.valueOf(value));
            emit("write", attempt(a) + ",\"value\":" + value + ",\"outcome\":\"" + written.outcome + "\"");
            // The nested hold is released before or after the outer one's last pause.
            if (nested && innerFirst) {
                unlockQuietly(lock);
                sleepNanos(hold / 2);
            } else if (nested) {
                sleepNanos(hold / 2);
                unlockQuietly(lock);
            } else {
                sleepNanos(hold / 2);
            }
        }

        /** RReadWriteLock: its read lock three rounds in four, else its write lock. */
        private void rwRound() {
            long a = nextAttempt++;
            String name = randomName();
            long wait = randomWait();
            boolean shared = rng.nextInt(4) != 0;
            RReadWriteLock rw = redisson.getReadWriteLock(name);
            RLock lock = shared ? rw.readLock() : rw.writeLock();
            start(a, name, wait, shared ? ",\"shared\":true" : "");
            boolean got;
            try {
                got = lock.tryLock(wait, TimeUnit.MILLISECONDS);
            } catch (Exception error) {
                failed(a, error);
                sleepNanos(TimeUnit.MILLISECONDS.toNanos(50));
                return;
            }
            if (!got) {
                emit("busy", attempt(a));
                return;
            }
            held(a, lock::unlockAsync);
        }

        /**
         * RFairLock: every call waits the configured fairLockWaitTimeout (Redisson
         * spaces its queue's deadlines by that one wait); one that ends without the lock
         * is followed at once by another on the same name.
         */
        private void fairRound() {
            long a = nextAttempt++;
            String name = rewait != null ? rewait : randomName();
            rewait = null;
            start(a, name, fairWaitMs, ",\"fifo\":true");
            RLock lock = redisson.getFairLock(name);
            boolean got;
            try {
                got = lock.tryLock(fairWaitMs, TimeUnit.MILLISECONDS);
            } catch (Exception error) {
                failed(a, error);
                rewait = name;
                return;
            }
            if (!got) {
                emit("busy", attempt(a));
                rewait = name;
                return;
            }
            held(a, lock::unlockAsync);
        }

        /** RPermitExpirableSemaphore: a permit with a lease (Redisson never renews one). */
        private void semaphoreRound() {
            long a = nextAttempt++;
            String name = randomName();
            long wait = randomWait();
            start(a, name, wait, ",\"permits\":" + PERMITS);
            RPermitExpirableSemaphore semaphore = redisson.getPermitExpirableSemaphore(name);
            String permit;
            try {
                permit = semaphore.tryAcquire(wait, leaseMs, TimeUnit.MILLISECONDS);
            } catch (Exception error) {
                failed(a, error);
                sleepNanos(TimeUnit.MILLISECONDS.toNanos(50));
                return;
            }
            if (permit == null) {
                emit("busy", attempt(a));
                return;
            }
            emit("grant", attempt(a) + ",\"token\":0");
            // Never past the lease: the permit would expire.
            sleepNanos(TimeUnit.MILLISECONDS.toNanos(rng.nextInt(20)));
            release(a, () -> semaphore.tryReleaseAsync(permit));
        }

        /** A granted unfenced hold: kept for a while, then released. */
        private void held(long a, Release release) {
            emit("grant", attempt(a) + ",\"token\":0");
            sleepNanos(unfencedHoldNanos());
            release(a, release);
        }
    }

    /** A release call, made on the holding thread (Redisson's owner is the thread). */
    private interface Release {
        RFuture<?> call();
    }

    /** Releases, bounded: ok, not_held (Redisson says this thread holds none) or error. */
    private static void release(long a, Release release) {
        emit("unlock", attempt(a));
        String released;
        try {
            Object answer = release.call().get(RELEASE_BOUND_S, TimeUnit.SECONDS);
            released = Boolean.FALSE.equals(answer) ? "not_held" : "ok";
        } catch (TimeoutException error) {
            released = "error";
        } catch (Exception error) {
            released = notHeld(error) ? "not_held" : "error";
        }
        emit("unlocked", attempt(a) + ",\"released\":\"" + released + "\"");
    }

    private static boolean notHeld(Throwable error) {
        for (Throwable cause = error; cause != null; cause = cause.getCause()) {
            if (cause instanceof IllegalMonitorStateException) {
                return true;
            }
            if (cause.getCause() == cause) {
                break;
            }
        }
        return false;
    }

    /** Releases a nested hold, whatever happens. */
    private static void unlockQuietly(RLock lock) {
        try {
            lock.unlock();
        } catch (Exception error) {
            // The outer release says how the hold ended.
        }
    }

    /** How a fenced call of the register ended, and the value a read found. */
    private record Fenced(String outcome, String value) {}

    /**
     * fence.lua on the resource server: a read (value null) or a write of the register
     * with the token. {1, value} is ok, {0, newest} stale; an exception unknown.
     */
    private static Fenced fence(String register, long token, String value) {
        Object[] args = value == null
            ? new Object[] {Long.toUnsignedString(token)}
            : new Object[] {Long.toUnsignedString(token), value};
        try {
            List<Object> reply = resource.getScript(StringCodec.INSTANCE).eval(register,
                RScript.Mode.READ_WRITE, fenceScript, RScript.ReturnType.LIST,
                List.of(register), args);
            String accepted = String.valueOf(reply.get(0));
            if (accepted.equals("1")) {
                Object found = reply.size() > 1 ? reply.get(1) : null;
                return new Fenced("ok", found == null ? null : String.valueOf(found));
            }
            return new Fenced(accepted.equals("0") ? "stale" : "unknown", null);
        } catch (Exception error) {
            return new Fenced("unknown", null);
        }
    }

    private static void start(long a, String name, long waitMs, String extra) {
        emit("start", attempt(a) + ",\"name\":" + quote(name) + ",\"wait_ms\":" + waitMs + extra);
    }

    private static void failed(long a, Exception error) {
        emit("error", attempt(a) + ",\"error\":" + quote(text(error)));
    }

    private static String attempt(long a) {
        return ",\"a\":" + a;
    }

    /** Prints one op, whole, with its time taken under the lock. */
    private static synchronized void emit(String op, String fields) {
        out.print("{\"op\":\"" + op + "\",\"t\":" + nowUs() + fields + "}\n");
        out.flush();
    }

    /** CLOCK_MONOTONIC in microseconds: System.nanoTime() on Linux HotSpot. */
    private static long nowUs() {
        return System.nanoTime() / 1000;
    }

    /**
     * An exception on one line, cut short: Redisson's timeout messages quote the whole
     * script of the command.
     */
    private static String text(Throwable error) {
        String text = String.valueOf(error).replaceAll("\\s+", " ");
        return text.length() <= ERROR_CHARS ? text : text.substring(0, ERROR_CHARS) + "...";
    }

    private static String quote(String text) {
        StringBuilder quoted = new StringBuilder("\"");
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '"' || c == '\\') {
                quoted.append('\\').append(c);
            } else if (c < 0x20) {
                quoted.append(String.format("\\u%04x", (int) c));
            } else {
                quoted.append(c);
            }
        }
        return quoted.append('"').toString();
    }

    private static void sleepNanos(long nanos) {
        try {
            Thread.sleep(nanos / 1_000_000, (int) (nanos % 1_000_000));
        } catch (InterruptedException error) {
            Thread.currentThread().interrupt();
        }
    }

    private static String required(Map<String, String> flags, String name) {
        String value = flags.get(name);
        if (value == null) {
            usage("--" + name + " is required");
        }
        return value;
    }

    private static long number(Map<String, String> flags, String name, long fallback, long min, long max) {
        String text = flags.get(name);
        if (text == null) {
            return fallback;
        }
        try {
            long value = Long.parseLong(text);
            if (value >= min && value <= max) {
                return value;
            }
        } catch (NumberFormatException error) {
            // Below.
        }
        usage("--" + name + ": `" + text + "` is not a number from " + min + " to " + max);
        return fallback;
    }

    /** `500ms`, `2s`, `30m`, `1h`, in milliseconds. */
    private static long durationMs(Map<String, String> flags, String name, long fallback) {
        String text = flags.get(name);
        if (text == null) {
            return fallback;
        }
        int split = 0;
        while (split < text.length() && text.charAt(split) >= '0' && text.charAt(split) <= '9') {
            split++;
        }
        try {
            long number = Long.parseLong(text.substring(0, split));
            switch (text.substring(split)) {
                case "ms":
                    return number;
                case "s":
                    return TimeUnit.SECONDS.toMillis(number);
                case "m":
                    return TimeUnit.MINUTES.toMillis(number);
                case "h":
                    return TimeUnit.HOURS.toMillis(number);
                default:
                    break;
            }
        } catch (NumberFormatException error) {
            // Below.
        }
        usage("--" + name + ": `" + text + "` is not a duration (<digits><unit>, unit ms, s, m or h)");
        return fallback;
    }

    private static void usage(String problem) {
        System.err.println("chaos worker (java): " + problem);
        System.exit(2);
    }
}
