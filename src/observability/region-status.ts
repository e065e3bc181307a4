import type { MasterState } from '../redis/master-health.js';
import type { RegionStatus } from '../schema/server-info.js';

/**
 * Region mode as /rl/v1/info and the dashboard show it: the region's name and the global store's state,
 * `up` while it answers, `circuit_open` when a master's breaker refuses calls, else `down`.
 */
export function regionStatus(name: string, global: { reachable: boolean; masters: MasterState[] }): RegionStatus {
  const state = global.reachable ? 'up' : global.masters.some((m) => m.breaker === 'open') ? 'circuit_open' : 'down';
  return { name, global_store: { state, masters: global.masters } };
}
