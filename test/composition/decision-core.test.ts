/**
 * One composition core (src/composition/decision-core.ts) under the server, the sidecar and the embedded
 * client: the same settings reach it from each, its steps close in one order under each root's own, and
 * the three decide on the very same counters.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { startAgent } from '../../src/agent/agent.js';
import { loadAgentConfig } from '../../src/agent/config.js';
import { composeDecisionCore } from '../../src/composition/decision-core.js';
import { loadServerConfig } from '../../src/config.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { createEmbeddedClient, embeddedCoreSettings } from '../../src/embedded/embedded-client.js';
import { ShutdownOrder } from '../../src/lifecycle/shutdown-order.js';
import { startServer } from '../../src/server.js';
import { setLogLevel } from '../../src/util/log.js';
import { getSuiteRedis } from '../support/counter-stores.js';
import { postJson } from '../support/http.js';
import { randomPrefix, type RedisHandle } from '../support/redis.js';

const POLICY = { policy_id: 'core-shared', scope: { resource: 'core', user_id: '*' }, algorithm: { type: 'fixed_window', limit: 5, window: '1h' } };
/** The fields the core reads that all three roots carry. */
const SHARED = ['keyPrefix', 'counterStoreAddr', 'counterStoreTimeoutMs', 'leaseMaxWaitMs', 'region'] as const;
const shared = (settings: Record<(typeof SHARED)[number], unknown>) => Object.fromEntries(SHARED.map((name) => [name, settings[name]]));

describe('one composition core', function () {
  this.timeout(30_000);
  let dir: string;
  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-core-'));
    writeFileSync(join(dir, 'policies.json'), JSON.stringify({ policies: [POLICY] }));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('gets the same settings from the server, the sidecar and the embedded client (the settings table gives the embedded defaults)', () => {
    for (const env of [{}, { RL_COUNTERSTORE_ADDR: 'redis://127.0.0.1:6390' }, { RL_COUNTERSTORE_ADDR: 'redis://127.0.0.1:6390', RL_KEY_PREFIX: 'app:', RL_COUNTERSTORE_TIMEOUT_MS: '250' }]) {
      const server = shared(loadServerConfig(env));
      expect(shared(loadAgentConfig(env)), JSON.stringify(env)).to.deep.equal(server);
      const embedded = embeddedCoreSettings({ redisAddr: env.RL_COUNTERSTORE_ADDR, keyPrefix: env.RL_KEY_PREFIX, commandTimeoutMs: env.RL_COUNTERSTORE_TIMEOUT_MS === undefined ? undefined : Number(env.RL_COUNTERSTORE_TIMEOUT_MS) });
      expect(shared(embedded as never), JSON.stringify(env)).to.deep.equal(server);
    }
  });

  it('memory mode: the core adds its steps as it opens them, so they close leases first and the policy store last', async () => {
    const shutdown = new ShutdownOrder();
    const config = loadServerConfig({ RL_DATA_DIR: join(dir, 'data'), RL_POLICY_FILE: join(dir, 'policies.json') });
    const core = await composeDecisionCore(config, { shutdown, policies: { from: 'store', seed: () => [] } });
    try {
      expect(core.counters).to.be.instanceOf(MemoryCounterStore);
      expect(core.snapshots, 'RL_COUNTER_SNAPSHOT_SECS defaults to on').to.not.equal(undefined);
      expect(core.rlqs, 'memory counters can lend units').to.not.equal(undefined);
      expect(shutdown.names()).to.deep.equal(['leases', 'counter snapshots', 'counters', 'policies', 'policy store']);
    } finally {
      await shutdown.close();
    }
  });

  it("the server's drain closes its listeners, then what observes the core, then the core's steps", async () => {
    const server = await startServer(
      loadServerConfig({ RL_HTTP_ADDR: '127.0.0.1:0', RL_GRPC_ADDR: '127.0.0.1:0', RL_DATA_DIR: join(dir, 'data'), RL_POLICY_FILE: join(dir, 'policies.json'), RL_DRAIN_SECS: '0', RL_SHUTDOWN_DELAY_SECS: '0' }),
    );
    expect(server.shutdown.names()).to.deep.equal(['listeners', 'dashboard', 'leases', 'counter snapshots', 'counters', 'policies', 'policy store']);
    await server.drain();
  });

  describe('on one Redis', () => {
    let redis: RedisHandle;
    before(async () => (redis = await getSuiteRedis()));

    it('server, sidecar and embedded client decide on the same counter, and each closes the same core steps in the same order', async () => {
      const keyPrefix = randomPrefix();
      const redisEnv = { RL_COUNTERSTORE_ADDR: redis.url, RL_KEY_PREFIX: keyPrefix, RL_DRAIN_SECS: '0' };
      const server = await startServer(
        loadServerConfig({ ...redisEnv, RL_HTTP_ADDR: '127.0.0.1:0', RL_GRPC_ADDR: '127.0.0.1:0', RL_DATA_DIR: join(dir, 'data'), RL_POLICY_FILE: join(dir, 'policies.json'), RL_SHUTDOWN_DELAY_SECS: '0' }),
      );
      const agent = await startAgent(loadAgentConfig({ ...redisEnv, RL_AGENT_LISTEN: '127.0.0.1:0', RL_UPSTREAM_HTTP: `http://127.0.0.1:${server.httpPort}` }));
      const embedded = await createEmbeddedClient({ redisAddr: redis.url, keyPrefix, logger: false });
      try {
        await agent.counterStore!.waitUntilReady();
        const ctx = { resource: 'core', user_id: 'one-counter' };
        const viaServer = (await postJson(`http://127.0.0.1:${server.httpPort}/rl/v1/check`, ctx)).body;
        const viaAgent = (await postJson(`http://127.0.0.1:${agent.port}/rl/v1/check`, ctx)).body;
        const viaEmbedded = await embedded.check(ctx);
        expect([viaServer, viaAgent, viaEmbedded].map((d) => [d.matched_policy_id, d.remaining])).to.deep.equal([
          ['core-shared', 4],
          ['core-shared', 3],
          ['core-shared', 2],
        ]);
        expect(agent.counters.local, 'the sidecar decided itself').to.equal(1);
        const coreSteps = ['leases', 'counters', 'policies', 'policy store'];
        expect(server.shutdown.names().slice(-coreSteps.length)).to.deep.equal(coreSteps);
        // The sidecar's policies come from its sync, not a store: the core's counting steps, in the same order.
        expect(agent.shutdown.names()).to.deep.equal(['policy sync', 'listener', 'leases', 'counters']);
      } finally {
        await embedded.close();
        await agent.close();
        await server.drain();
      }
    });
  });
});
