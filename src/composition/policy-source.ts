import type { RegionConfig } from '../config.js';
import type { LiveMatcher } from '../matching/live-matcher.js';
import type { Policy } from '../policy/types.js';
import { PolicyService } from '../policy-service/policy-service.js';
import { FilePolicyStore } from '../policy-store/file-policy-store.js';
import type { PolicyStore } from '../policy-store/policy-store.js';
import { RedisPolicyStore } from '../policy-store/redis-policy-store.js';
import type { ShutdownOrder } from '../lifecycle/shutdown-order.js';

/** Where a core's policies come from. */
export type PolicySource =
  /** The store the settings name (see openPolicyStore), seeded from `seed` while it holds no policy. */
  | { from: 'store'; seed?: () => Policy[] | Promise<Policy[]> }
  /** These policies, in this process only (the embedded client's memory mode). */
  | { from: 'list'; policies: Policy[] }
  /** The core's matcher, kept up to date by its owner (the sidecar's policy sync). */
  | { from: 'matcher' };

export interface PolicyStoreSettings {
  keyPrefix: string;
  counterStoreAddr?: string;
  region?: RegionConfig;
  /** The journal's directory when no Redis is configured; without it such a store cannot be opened. */
  dataDir?: string;
  /** RL_PLATFORM_LAYERS: layers only credentials not limited to organisations read and write. */
  platformLayers?: readonly string[];
}

/** The policies the core decides by, in `matcher`: what it opened, and whether an empty store was seeded. */
export interface CorePolicies {
  store?: PolicyStore;
  /** Keeps the matcher in sync with every local and remote change of the store. */
  service?: PolicyService;
  seeded: boolean;
}

/** Fills `matcher` from `source`; what it opens closes in `shutdown` (the store last). */
export async function openPolicies(settings: PolicyStoreSettings, source: PolicySource, matcher: LiveMatcher, shutdown: ShutdownOrder): Promise<CorePolicies> {
  if (source.from === 'matcher') return { seeded: false };
  if (source.from === 'list') {
    matcher.replace(source.policies);
    return { seeded: false };
  }
  const store = await openPolicyStore(settings);
  shutdown.add('policy store', () => store.close());
  const seeded = source.seed ? await store.seedIfEmpty(source.seed) : false;
  const service = new PolicyService({ store, matcher, platformLayers: settings.platformLayers });
  shutdown.add('policies', () => service.close());
  return { store, service, seeded };
}

/**
 * Redis hashes when a shared store is configured (multi node), else the journal in the data directory.
 * With regions, the global store holds them, so a change made in any region reaches every region.
 */
function openPolicyStore(settings: PolicyStoreSettings): Promise<PolicyStore> {
  const { region, counterStoreAddr, keyPrefix, dataDir } = settings;
  if (region) {
    return RedisPolicyStore.open({
      addr: region.globalStoreAddr,
      keyPrefix,
      commandTimeoutMs: region.globalTimeoutMs,
      unavailable: {
        name: 'global store (RL_GLOBAL_COUNTERSTORE_ADDR)',
        consequence: '; policy changes are refused until it is reachable again, decisions go on with the policies this server holds',
      },
    });
  }
  if (counterStoreAddr) return RedisPolicyStore.open({ addr: counterStoreAddr, keyPrefix });
  if (dataDir === undefined) throw new TypeError('a policy store needs a Redis address or a data directory');
  return FilePolicyStore.open(dataDir);
}
