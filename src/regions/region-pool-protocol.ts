import { defineProtocol } from '../redis/script-protocol.js';

/**
 * The protocol of `lua/region_pool.lua`, a region's pool of units of one `budget: "global"` counter:
 * each operation's arguments (after ARGV[1], `now`) and the reply's fields, declared once
 * (src/redis/script-protocol.ts). RegionPool builds its calls and reads its answers here, the script's
 * in-memory port (test/regions/support/memory-region-pool.ts) builds its answers here, and the script's
 * header lists the same names in the same order (test/regions/region-pool-protocol.test.ts reads it through the
 * loader with this protocol, which checks that).
 *
 * Arguments: `cost` a decision's units (spend: all or nothing; take: up to that many, for a process lease
 * below the region); `lockMs` how long a refill lock given now lasts; `token` this server's id (the lock's
 * owner); `measureMs` the demand measure's period; `fresh` a decision's first look (its demand counts
 * once); `waitsFor` the refill this decision waits for, as the last answer said (0: none); `refill` a
 * refill's id, as the lock was given for it; `units`, `expiresAt` (this store's clock), `tag`,
 * `parentRemaining`, `retryAfterMs` (> 0: the parent admits no more that long) and `asked` what a refill
 * brings; `window` the tags are windows' (units of another window lapse), not a bucket's; `downMs` how
 * long short decisions fail at once after a refill could not reach the parent; `idleMs` a drain's idle
 * time (0: now); `below` a return from a process lease, into units of `tag` only.
 *
 * The pool hash's fields keep their short stored names (renaming them would change what a running
 * region holds); their meaning, as in the script's header:
 *
 * | field           | meaning                                                                              |
 * | --------------- | ------------------------------------------------------------------------------------ |
 * | a_u a_e a_t a_s | older generation: units, expires-at (this store's clock), tag, units spent from it   |
 * | b_u b_e b_t b_s | newer generation, the same                                                           |
 * | lk le           | refill lock: owner token, expires-at; with `ln`, the refill's id `lk:ln:le`         |
 * | pr              | what the parent could still admit after the last take (-1: not known yet)            |
 * | lc              | the chunk the last refill asked for (refill ahead once half of it is spent)          |
 * | du              | parent exhausted until                                                               |
 * | dd              | parent unreachable until                                                             |
 * | rw rs rp        | demand measure: period start, units wanted in it, in the previous period             |
 * | la              | last spend (idle return)                                                             |
 * | ln an           | refills started, and the last of them that landed                                    |
 * | wd              | units the decisions waiting for the next refill want                                |
 * | lw sh           | what those waiting for the last refill wanted; 1 when the last landed brought fewer |
 * | su              | parent short until (its retry_after; 0: at once)                                     |
 */
export const REGION_POOL = defineProtocol({
  script: 'region_pool',
  operationArg: true,
  operations: {
    spend: ['cost', 'lockMs', 'token', 'measureMs', 'fresh', 'waitsFor'],
    take: ['cost', 'lockMs', 'token', 'measureMs', 'fresh', 'waitsFor'],
    add: ['units', 'expiresAt', 'tag', 'parentRemaining', 'refill', 'retryAfterMs', 'asked', 'measureMs', 'window'],
    fail: ['refill', 'downMs'],
    drain: ['idleMs', 'window'],
    refund: ['units', 'tag', 'below'],
    peek: [],
  },
  reply: {
    spent: 'flag',
    left: 'number',
    retryAfterMs: 'number',
    refill: 'id',
    recent: 'number',
    parentRemaining: 'number',
    lapsed: 'number',
    down: 'flag',
    resetAfterMs: 'number',
    tag: 'tag',
    storeNow: 'number',
    waiting: 'number',
    waitsFor: 'number',
    stale: 'id',
  },
  optionalFields: 1,
});
