/**
 * A child for the policy memory test (run with --expose-gc --allow-natives-syntax): loads N policies
 * through the policy file module and builds a LiveMatcher over them, as a server's start-up does, then
 * prints one JSON line: the live heap they hold (after forced GCs) per policy, and whether V8 keeps
 * the stored objects in fast mode with one hidden class. Usage: node ... policy-heap-child.ts N
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { loadPolicyFile } from '../../src/policy/policy-file.js';

const count = Number(process.argv[2]);
const gc = (globalThis as { gc?: () => void }).gc!;
const liveHeap = () => {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
};
// V8 intrinsics (--allow-natives-syntax), reached through Function so that tsx need not parse them.
const hasFastProperties = new Function('o', 'return %HasFastProperties(o)') as (o: object) => boolean;
const haveSameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

/** The policies of a multi-tenant deployment, as a policy file holds them. */
function policyFileText(n: number): string {
  const policies = [];
  for (let i = 0; i < n; i++) {
    policies.push({
      policy_id: `p-${String(i).padStart(6, '0')}`,
      name: `tenant-${i} per user`,
      priority: i % 10,
      scope: { org_id: `org-${i % 500}`, tenant_id: `tenant-${i}`, endpoint: `/api/endpoint-${i % 20}`, signal_type: 'http', user_id: '*' },
      algorithm: i % 2 ? { type: 'fixed_window', limit: 1000, window: '1m' } : { type: 'token_bucket', limit: 600, window: '1m', burst: 100 },
      action: 'deny',
    });
  }
  return JSON.stringify({ policies });
}

// Written and read back as a server reads RL_POLICY_FILE; the text is gone before either measure, so
// neither holds it (or what making it left behind) and the difference is the policies and the matcher.
const dir = mkdtempSync(join(tmpdir(), 'rl-policy-heap-'));
const file = join(dir, 'policies.json');
writeFileSync(file, policyFileText(count));
const before = liveHeap();
const policies = loadPolicyFile(file);
const matcher = new LiveMatcher(policies);
const after = liveHeap();
rmSync(dir, { recursive: true, force: true });
const [a, b] = [policies[1], policies[count - 1]];
process.stdout.write(
  `${JSON.stringify({
    bytes_per_policy: (after - before) / count,
    compiled: matcher.current().size,
    fast: [a, a.scope, a.algorithm].every((o) => hasFastProperties(o)),
    same_shape: haveSameMap(a, b) && haveSameMap(a.scope, b.scope),
    shared_algorithm: a.algorithm === policies[3].algorithm && Object.isFrozen(a.algorithm),
    shared_metadata: a.metadata === b.metadata,
  })}\n`,
);
