import { readFileSync } from 'node:fs';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { round } from '../lib/stats.js';
import { argOf, childMain, send } from './common.js';

/**
 * The policy-changes scenario's change sender (bench/policy-changes.ts), in its own process so that its
 * HTTP client never stalls the decision load generator's event loop. Warms its client on one policy,
 * answers `{type: 'ready'}`, then on `{type: 'churn', perSecond, durationSec}` sends the changes and
 * answers `{type: 'churned', ...}`, with this process's CPU time per change (it shares the load
 * generator's core).
 *
 * Why node:http and not fetch: undici's fetch costs several times more CPU a request, on the core the
 * decision load generator measures latency from; its stalls would show up as decision latency.
 */
/** Each churn's new policy ids are its own: a create left over from an earlier churn never collides. */
let churns = 0;
/** Keep-alive connections: a change never pays for a TCP handshake. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });

childMain(async () => {
  const port = Number(argOf('port'));
  const policies = JSON.parse(readFileSync(argOf('policies'), 'utf8')) as Record<string, unknown>[];
  await call(port, 'GET', `/rl/v1/policies/${encodeURIComponent(policies[0].policy_id as string)}`);
  process.on('message', (message: { type?: string; perSecond?: number; durationSec?: number }) => {
    if (message?.type === 'churn') void churn(port, policies, message.perSecond!, message.durationSec!, `r${churns++}-`).then((result) => send({ type: 'churned', ...result }));
  });
  send({ type: 'ready' });
});

/** One request; resolves with the status once the whole answer was read. */
function call(port: number, method: string, path: string, body?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers = body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
    const request = http.request({ host: '127.0.0.1', port, method, path, agent, headers }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}

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
  const base = '/rl/v1/policies';
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let failed = 0;
  const pending: Promise<void>[] = [];
  const send = async (i: number) => {
    const source = policies[(i * 7919) % policies.length];
    // A delete waits for the create it undoes (open loop: that create may still be in flight).
    if (i % 3 === 2) await pending[i - 2];
    const started = performance.now();
    let status: number;
    if (i % 3 === 0) {
      status = await call(port, 'POST', base, bodyOf(source, { policy_id: `churn-${prefix}${i}`, priority: 50 }));
    } else if (i % 3 === 1) {
      status = await call(port, 'PUT', `${base}/${encodeURIComponent(source.policy_id as string)}`, bodyOf(source, { priority: (i % 20) + 1 }));
    } else {
      status = await call(port, 'DELETE', `${base}/churn-${prefix}${i - 2}`);
    }
    latencies.push(performance.now() - started);
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (status < 200 || status >= 300) failed++;
  };
  const cpuBefore = process.cpuUsage();
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
  const cpu = process.cpuUsage(cpuBefore);
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { sent: total, failed, statuses, p50_ms: round(at(0.5)), p99_ms: round(at(0.99)), max_ms: round(latencies[latencies.length - 1] ?? NaN), client_cpu_ms_per_change: round((cpu.user + cpu.system) / 1000 / total) };
}
