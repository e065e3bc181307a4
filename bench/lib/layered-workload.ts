import type { Policy } from '../../src/policy/types.js';
import { TARGET_LIMIT, TARGET_WINDOW, generateWorkload, type Workload } from './workload.js';

/** Scenario 18's layers: the shared workload's policies dealt round robin into these. */
export const BENCH_LAYERS = ['default', 'org', 'team', 'platform'];

/**
 * Scenario 18 (layers at scale): the shared workload of `count` policies spread over four layers, plus in
 * each layer the target doesn't sit in, one policy of the target's own scope (a limit one higher, so the
 * target still decides): every benchmark request is decided by four layers.
 */
export function layeredWorkload(count: number): Workload {
  const workload = generateWorkload(count);
  const layered = workload.policies.map((p, i) => relayer(p, BENCH_LAYERS[i % BENCH_LAYERS.length]));
  const target = layered.find((p) => p.policy_id === workload.targetPolicyId)!;
  const others = BENCH_LAYERS.filter((layer) => layer !== (target.layer ?? 'default'));
  const copies = others.map((layer) =>
    relayer({ ...target, policy_id: `target-${layer}`, algorithm: { type: 'fixed_window', limit: TARGET_LIMIT + 1, window: TARGET_WINDOW } } as Policy, layer),
  );
  return { ...workload, policies: [...layered, ...copies] };
}

/** The stored policy in another layer (the names are valid layer names; the rest was validated already). */
function relayer(policy: Policy, layer: string): Policy {
  return { ...policy, layer };
}
