/**
 * Fixtures of the worker-group tests: the real server with RL_WORKERS as a child process, requests on
 * fresh connections (node:cluster's primary hands each new connection to the next worker in turn, so
 * consecutive requests reach different workers), and the /metrics samples they read.
 */
import http from 'node:http';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';

/** Starts the group; resolves once the primary logs `workers ready` (every worker listens). */
export async function startGroup(env: Record<string, string>): Promise<ServerProcessHandle> {
  const group = await startServerProcess(env, { timeoutMs: 60_000 });
  await waitForLog(group, (line) => line.message === 'workers ready');
  return group;
}

/** The first log line `matches` accepts (checked every 20 ms); rejects if the process exits first. */
export async function waitForLog(
  process: ServerProcessHandle,
  matches: (line: Record<string, unknown>) => boolean,
): Promise<Record<string, unknown>> {
  let exited = false;
  void process.exited.then(() => (exited = true));
  for (;;) {
    const line = process.logs().find(matches);
    if (line) return line;
    if (exited) throw new Error(`the process exited before the awaited log line\n${process.stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export interface Answer {
  status: number;
  body: any;
  text: string;
}

/** One request on its own connection (no agent, `Connection: close`). */
export function request(port: number, method: string, path: string, body?: unknown): Promise<Answer> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: false,
        headers: { connection: 'close', ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          resolve({ status: res.statusCode!, body: parsed, text });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** `check` on a fresh connection. */
export const check = (port: number, ctx: Record<string, unknown>) => request(port, 'POST', '/rl/v1/check', ctx);

/** The samples of a Prometheus text exposition, by `name{labels}` exactly as written. */
export function samples(exposition: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of exposition.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    values.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return values;
}

/** The group's /metrics as samples. */
export async function scrape(port: number): Promise<Map<string, number>> {
  const answer = await request(port, 'GET', '/metrics');
  if (answer.status !== 200) throw new Error(`/metrics answered ${answer.status}: ${answer.text}`);
  return samples(answer.text);
}

/** `rl_worker_decisions_total` per worker slot. */
export function decisionsByWorker(metrics: Map<string, number>): Map<string, number> {
  const byWorker = new Map<string, number>();
  for (const [series, value] of metrics) {
    const m = /^rl_worker_decisions_total\{worker="(\d+)"\}$/.exec(series);
    if (m) byWorker.set(m[1], value);
  }
  return byWorker;
}

/** The sum of every series of `name` (all label sets). */
export function total(metrics: Map<string, number>, name: string): number {
  let sum = 0;
  for (const [series, value] of metrics) if (series === name || series.startsWith(`${name}{`)) sum += value;
  return sum;
}
