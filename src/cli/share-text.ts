import type { RegionShareUse } from '../schema/server-info.js';

/** `rl status`'s line for one shared global budget: `api: eu 30/60, us 12/20, common 8/20 (41 s left)`. */
export function shareText(use: RegionShareUse): string {
  const regions = use.regions.map((r) => `${r.region} ${r.taken}/${r.guaranteed}`);
  return `${use.policy_id}: ${[...regions, `common ${use.common.taken}/${use.common.size}`].join(', ')} (${Math.ceil(use.window_left_ms / 1000)} s of the window left)`;
}
