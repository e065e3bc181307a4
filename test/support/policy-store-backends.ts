import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FilePolicyStore } from '../../src/policy-store/file-policy-store.js';
import type { PolicyStore } from '../../src/policy-store/policy-store.js';
import { RedisPolicyStore } from '../../src/policy-store/redis-policy-store.js';
import { getSuiteRedis } from './counter-stores.js';
import { randomPrefix } from './redis.js';

export interface PolicyStoreBackend {
  name: 'file' | 'redis';
  /** A fresh store; `keyPrefix` (Redis only) lets two stores share one policy set. */
  open(keyPrefix?: string): Promise<{ store: PolicyStore; cleanup: () => Promise<void> }>;
}

/** The two policy stores, for tests that run once per backend: a file store in a temp dir `<dirPrefix>XXXXXX`, and Redis. */
export function policyStoreBackends(dirPrefix: string): PolicyStoreBackend[] {
  return [
    {
      name: 'file',
      open: async () => {
        const dir = mkdtempSync(join(tmpdir(), dirPrefix));
        const store = await FilePolicyStore.open(dir);
        return { store, cleanup: async () => { await store.close(); rmSync(dir, { recursive: true, force: true }); } };
      },
    },
    {
      name: 'redis',
      open: async (keyPrefix = randomPrefix()) => {
        const redis = await getSuiteRedis();
        const store = await RedisPolicyStore.open({ addr: redis.url, keyPrefix });
        return { store, cleanup: () => store.close() };
      },
    },
  ];
}
