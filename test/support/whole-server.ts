import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadServerConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { setLogLevel } from '../../src/util/log.js';
import { tempDir } from './temp-dir.js';

export interface WholeServer {
  server: RunningServer;
  /** `http://127.0.0.1:<port>` of its HTTP listener. */
  url: string;
}

/**
 * For a describe() whose tests each start a whole server in this process: logs silenced, a fresh data
 * directory per test. `start` writes `policies` as the server's policy file there and listens on
 * ephemeral ports, draining at once when told to stop; the test drains it (`server.drain()`).
 */
export function wholeServerSuite(prefix: string): { start(policies: unknown[]): Promise<WholeServer> } {
  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));
  const dataDir = tempDir(prefix, { per: 'test' });
  return {
    async start(policies) {
      const policyFile = join(dataDir.path, 'policies.json');
      writeFileSync(policyFile, JSON.stringify({ policies }));
      const server = await startServer(
        loadServerConfig({ RL_HTTP_ADDR: '127.0.0.1:0', RL_GRPC_ADDR: '127.0.0.1:0', RL_DATA_DIR: dataDir.path, RL_POLICY_FILE: policyFile, RL_DRAIN_SECS: '0', RL_SHUTDOWN_DELAY_SECS: '0' }),
      );
      return { server, url: `http://127.0.0.1:${server.httpPort}` };
    },
  };
}
