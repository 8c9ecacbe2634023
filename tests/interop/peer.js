// A Redisson-protocol peer for tests/redisson_interop.rs: node-redisson, which keeps
// locks with Redisson's RLock scripts, hash fields and release channel, driven over
// stdin one command per line and answering on stdout.
//
//   node peer.js <redis url> <watchdog timeout ms>
//
// Commands run concurrently; each starts with an id that its answer repeats:
//   <id> lock <name> <thread>              -> <id> locked <epoch ms>
//   <id> trylock <name> <thread> <wait ms> -> <id> trylock <true|false> <epoch ms>
//   <id> unlock <name> <thread>            -> <id> unlocked <epoch ms>
//   <id> count <name> <thread> <counter> <n> <inside ms>
//        n critical sections {lock; GET counter; wait; SET counter + 1; unlock}
//                                          -> <id> counted <n>
// A failed command answers "<id> error <message>". The owner id of <thread> on a lock
// is "<this process's uuid>:<thread>", as a Java thread's is "<uuid>:<thread id>".
'use strict';

const readline = require('node:readline');
const { Redisson } = require('node-redisson');

const [url, watchdogMs] = process.argv.slice(2);
const parsed = new URL(url);
const redisson = new Redisson({
  redis: { options: { host: parsed.hostname, port: Number(parsed.port) } },
  lockWatchdogTimeout: BigInt(watchdogMs),
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (...words) => process.stdout.write(words.join(' ') + '\n');

async function run(verb, args) {
  const lock = redisson.getLock(args[0], args[1]);
  switch (verb) {
    case 'lock':
      await lock.lock();
      return ['locked', Date.now()];
    case 'trylock': {
      const got = await lock.tryLock(Number(args[2]), true);
      return ['trylock', got, Date.now()];
    }
    case 'unlock':
      await lock.unlock();
      return ['unlocked', Date.now()];
    case 'count': {
      const [counter, n, insideMs] = [args[2], Number(args[3]), Number(args[4])];
      for (let i = 0; i < n; i++) {
        await lock.lock();
        const value = Number((await redisson.redis.get(counter)) || '0');
        await sleep(insideMs);
        await redisson.redis.set(counter, String(value + 1));
        await lock.unlock();
      }
      return ['counted', n];
    }
    default:
      throw new Error(`unknown command ${verb}`);
  }
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const [id, verb, ...args] = line.trim().split(/\s+/);
  if (!verb) return;
  run(verb, args).then(
    (answer) => say(id, ...answer),
    (error) => say(id, 'error', String(error && error.message).replace(/\s+/g, ' ')),
  );
}).on('close', () => redisson.quit().then(() => process.exit(0)));

say('ready');
