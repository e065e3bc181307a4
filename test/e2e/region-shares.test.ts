import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomPrefix, startPrivateRedis, type RedisHandle } from '../support/redis.js';
import { regionNodeEnv, startServerProcess, type ServerProcessHandle } from '../support/server-process.js';

/**
 * budget_shares with real regions: one global and two regional redis-servers, a server in each region.
 * The limit is 40 a window, `{"eu": 2, "us": 1, "*": 1}`: eu is guaranteed 20, us 10, and 10 are common.
 * eu floods first; us, quiet until then, still gets its 10: in a fixed window, and in the sliding windows
 * (sliding_window_counter, and sliding_window_log, which leases nothing), whose flood stays counted as
 * the window slides. Counts only, no assertion on time.
 */
describe('two regions, real processes: weighted shares of a global budget', function () {
  this.timeout(120_000);
  const LIMIT = 40;
  let global: RedisHandle;
  const stores: RedisHandle[] = [];
  const servers: Record<'eu' | 'us', ServerProcessHandle> = {} as never;
  let dir: string;
  /** A window this run never sees end: 1 h, or 1 day when the hour is nearly over. */
  const window = 3_600_000 - (Date.now() % 3_600_000) > 10 * 60_000 ? '1h' : '1d';
  /** A sliding window whose current sub-window this run never sees end: of the two, the one with more of it left. */
  const sliding = [
    { window: '1h', sub_window_count: 4, bucketMs: 900_000 },
    { window: '63m', sub_window_count: 3, bucketMs: 1_260_000 },
  ].sort((a, b) => (b.bucketMs - (Date.now() % b.bucketMs)) - (a.bucketMs - (Date.now() % a.bucketMs)))[0];

  before(async function () {
    [global, stores[0], stores[1]] = await Promise.all([startPrivateRedis(), startPrivateRedis(), startPrivateRedis()]);
    dir = mkdtempSync(join(tmpdir(), 'rl-shares-'));
    const policyFile = join(dir, 'policies.json');
    const shares = { budget: 'global', budget_shares: { eu: 2, us: 1, '*': 1 } };
    const policy = { policy_id: 'shared', scope: { resource: 'shared' }, ...shares, algorithm: { type: 'fixed_window', limit: LIMIT, window } };
    const slidingPolicy = {
      policy_id: 'shared-sliding', scope: { resource: 'shared-sliding' }, ...shares,
      algorithm: { type: 'sliding_window_counter', limit: LIMIT, window: sliding.window, sub_window_count: sliding.sub_window_count },
    };
    const logPolicy = { policy_id: 'shared-log', scope: { resource: 'shared-log' }, ...shares, algorithm: { type: 'sliding_window_log', limit: LIMIT, window } };
    writeFileSync(policyFile, JSON.stringify({ policies: [policy, slidingPolicy, logPolicy] }));
    const prefix = randomPrefix();
    const env = (region: 'eu' | 'us', store: RedisHandle) =>
      regionNodeEnv({ region, counters: store.url, global: global.url, prefix, policyFile, dataDir: join(dir, 'unused') });
    // eu seeds the empty global store first; us finds it seeded.
    servers.eu = await startServerProcess(env('eu', stores[0]));
    servers.us = await startServerProcess(env('us', stores[1]));
  });

  after(async function () {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
    await Promise.all([global?.stop(), ...stores.map((s) => s?.stop())]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** `count` checks from `region`, 8 in flight; answers the admitted and the refused (limit_exceeded), and any other answer. */
  async function send(region: 'eu' | 'us', count: number, resource = 'shared') {
    const outcome = { admitted: 0, refused: 0, other: [] as string[] };
    let next = 0;
    const worker = async () => {
      while (next < count) {
        next++;
        const response = await fetch(`${servers[region].url}/rl/v1/check`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ resource, user_id: 'u' }),
        });
        const body = (await response.json()) as { allowed: boolean; reason: string; metadata: Record<string, string> };
        if (body.allowed) outcome.admitted++;
        else if (body.reason === 'limit_exceeded') outcome.refused++;
        else outcome.other.push(body.reason);
        expect(body.metadata.region).to.equal(region);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    return outcome;
  }

  /** The global counter's last word to a region on each region's use of `policyId`'s window, in its /rl/v1/info. */
  async function sharesSeen(region: 'eu' | 'us', policyId: string) {
    const info = (await (await fetch(`${servers[region].url}/rl/v1/info`)).json()) as { region: { name: string; shares?: { policy_id: string; regions: { region: string; taken: number; guaranteed: number }[]; common: { size: number; taken: number } }[] } };
    expect(info.region.name).to.equal(region);
    const use = info.region.shares?.find((s) => s.policy_id === policyId);
    expect(use, JSON.stringify(info.region)).to.not.equal(undefined);
    return use!;
  }

  const cases = [
    { name: 'a fixed window', resource: 'shared' },
    { name: 'a sliding window', resource: 'shared-sliding' },
    // It leases nothing: every decision asks the global counter, naming its region.
    { name: 'a sliding log', resource: 'shared-log' },
  ];
  for (const { name, resource } of cases) {
    it(`${name}: a flooding region takes its guarantee and the common share, never the quiet region's guarantee`, async () => {
      const flood = await send('eu', 120, resource);
      expect(flood.other, 'answers other than allowed or limit_exceeded').to.deep.equal([]);
      // Its own 20 and, at most, the common 10.
      expect(flood.admitted, 'eu admitted').to.be.within(20, 30);
      const quiet = await send('us', 30, resource);
      expect(quiet.other).to.deep.equal([]);
      expect(quiet.admitted, 'us admitted after the flood').to.be.at.least(10);
      expect(flood.admitted + quiet.admitted, 'both regions together').to.be.at.most(LIMIT);

      // Each region's use of the window, as the global counter last answered: in /rl/v1/info.
      const use = await sharesSeen('us', resource);
      expect(use.regions.map((r) => [r.region, r.guaranteed])).to.deep.equal([['eu', 20], ['us', 10]]);
      expect(use.common.size).to.equal(10);
      const taken = Object.fromEntries(use.regions.map((r) => [r.region, r.taken]));
      expect(taken.us).to.be.at.least(quiet.admitted);
      expect(taken.eu).to.be.within(20, 30);
      expect(taken.eu + taken.us).to.be.at.most(LIMIT);
      console.log(`      ${name}: eu admitted ${flood.admitted} of 120 checks, then us ${quiet.admitted} of 30; the global counter says eu took ${taken.eu}, us ${taken.us}`);
    });
  }
});
