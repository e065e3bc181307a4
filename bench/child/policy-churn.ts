import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { round } from '../lib/stats.js';
import { argOf, childMain, send } from './common.js';

/**
 * The policy-changes scenario's change sender (bench/policy-changes.ts), in its own process so that its
 * HTTP client never stalls the decision load generator's event loop. Warms its client on one policy,
 * answers `{type: 'ready'}`, then on `{type: 'churn', perSecond, durationSec}` sends the changes and
 * answers `{type: 'churned', ...}`.
 */
/** Each churn's new policy ids are its own: a create left over from an earlier churn never collides. */
let churns = 0;

childMain(async () => {
  const port = Number(argOf('port'));
  const policies = JSON.parse(readFileSync(argOf('policies'), 'utf8')) as Record<string, unknown>[];
  // fetch loads its HTTP client on first use.
  await (await fetch(`http://127.0.0.1:${port}/rl/v1/policies/${policies[0].policy_id as string}`)).arrayBuffer();
  process.on('message', (message: { type?: string; perSecond?: number; durationSec?: number }) => {
    if (message?.type === 'churn') void churn(port, policies, message.perSecond!, message.durationSec!, `r${churns++}-`).then((result) => send({ type: 'churned', ...result }));
  });
  send({ type: 'ready' });
});

/** A body the policy API accepts, made from one of the workload's policies (server-set fields left out). */
function bodyOf(policy: Record<string, unknown>, changes: Record<string, unknown>): string {
  const { version: _v, created_at: _c, updated_at: _u, ...rest } = policy;
  return JSON.stringify({ ...rest, ...changes });
}

/**
 * `perSecond` changes a second for `durationSec`, on a timer (open loop): the i-th creates a new
 * policy, updates an existing one or deletes the one created two steps before. Resolves with every
 * change's round trip and how many the API refused.
 */
async function churn(port: number, policies: Record<string, unknown>[], perSecond: number, durationSec: number, prefix: string) {
  const base = `http://127.0.0.1:${port}/rl/v1/policies`;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let failed = 0;
  const pending: Promise<void>[] = [];
  const send = async (i: number) => {
    const source = policies[(i * 7919) % policies.length];
    // A delete waits for the create it undoes (open loop: that create may still be in flight).
    if (i % 3 === 2) await pending[i - 2];
    const started = performance.now();
    let response: Response;
    if (i % 3 === 0) {
      response = await fetch(base, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bodyOf(source, { policy_id: `churn-${prefix}${i}`, priority: 50 }) });
    } else if (i % 3 === 1) {
      response = await fetch(`${base}/${source.policy_id as string}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: bodyOf(source, { priority: (i % 20) + 1 }) });
    } else {
      response = await fetch(`${base}/churn-${prefix}${i - 2}`, { method: 'DELETE' });
    }
    await response.arrayBuffer();
    latencies.push(performance.now() - started);
    statuses[response.status] = (statuses[response.status] ?? 0) + 1;
    if (!response.ok) failed++;
  };
  const total = Math.round(perSecond * durationSec);
  await new Promise<void>((resolve) => {
    let i = 0;
    const timer = setInterval(() => {
      pending.push(send(i++).catch(() => void failed++));
      if (i >= total) {
        clearInterval(timer);
        resolve();
      }
    }, 1000 / perSecond);
  });
  await Promise.all(pending);
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { sent: total, failed, statuses, p50_ms: round(at(0.5)), p99_ms: round(at(0.99)), max_ms: round(latencies[latencies.length - 1] ?? NaN) };
}
