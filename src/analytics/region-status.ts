import type { MasterState } from '../redis/master-health.js';
import type { RegionShareUse, RegionStatus } from '../schema/server-info.js';

/**
 * Region mode as /rl/v1/info and the dashboard show it: the region's name and the global store's state,
 * `up` while it answers, `circuit_open` when a master's breaker refuses calls, else `down`; and each
 * global budget with shares as the global counter last answered (present only when there are some).
 */
export function regionStatus(name: string, global: { reachable: boolean; masters: MasterState[] }, shares: RegionShareUse[] = []): RegionStatus {
  const state = global.reachable ? 'up' : global.masters.some((m) => m.breaker === 'open') ? 'circuit_open' : 'down';
  const status: RegionStatus = { name, global_store: { state, masters: global.masters } };
  if (shares.length > 0) status.shares = shares;
  return status;
}
