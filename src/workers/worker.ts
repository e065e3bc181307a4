import type { ServerConfig } from '../config.js';
import { RlError } from '../errors.js';
import type { MetricsSource } from '../http/routes/metrics.js';
import type { Metrics } from '../observability/metrics.js';
import { startServer } from '../server.js';
import type { Started } from '../util/run-main.js';
import { isPrimaryMessage, type MetricsExpositionMessage, type WorkerMessage } from './messages.js';

/** Longer than the primary's own wait for the other workers, so the primary's answer says who was missing. */
const GROUP_METRICS_TIMEOUT_MS = 10_000;

/**
 * One worker of the group (a node:cluster child): today's server, whose /metrics answers for the whole
 * group through the primary, and which tells the primary when it is ready and what its registry holds.
 * SIGTERM drains it exactly as a single process (runMain); the primary sends it to every worker.
 */
export async function startWorker(config: ServerConfig): Promise<Started> {
  const groupMetrics = new GroupMetrics();
  let local: Metrics | undefined;
  const server = await startServer(config, {
    metricsSource: (metrics) => {
      local = metrics;
      groupMetrics.contentType = metrics.contentType;
      return groupMetrics;
    },
  });
  process.on('message', (message: unknown) => {
    if (!isPrimaryMessage(message)) return;
    if (message.rl === 'metrics-exposition') groupMetrics.settle(message);
    else if (message.rl === 'metrics-collect' && local) {
      const { id } = message;
      void local.registry.getMetricsAsJSON().then((metrics) => send({ rl: 'metrics-snapshot', id, metrics: metrics as never }));
    }
  });
  send({ rl: 'ready', http: server.httpPort, grpc: server.grpcPort });
  return { drainSecs: config.drainSecs, shutdownDelaySecs: config.shutdownDelaySecs, drain: () => server.drain() };
}

function send(message: WorkerMessage): void {
  // The channel is gone only when the primary is: node:cluster then ends this worker itself.
  if (process.connected) process.send!(message);
}

/** /metrics in a worker: asks the primary, which collects every worker's registry and sums them. */
class GroupMetrics implements MetricsSource {
  contentType = 'text/plain; version=0.0.4; charset=utf-8';
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: (text: string) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }>();

  exposition(): Promise<string> {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.fail(id, 'the primary did not answer'), GROUP_METRICS_TIMEOUT_MS);
      this.pending.set(id, { resolve, reject, timer });
      if (!process.connected) return this.fail(id, 'the primary is gone');
      process.send!({ rl: 'metrics-request', id } satisfies WorkerMessage);
    });
  }

  settle(message: MetricsExpositionMessage): void {
    const request = this.pending.get(message.id);
    if (!request) return;
    if (message.text === undefined) return this.fail(message.id, message.error ?? 'no exposition');
    this.pending.delete(message.id);
    clearTimeout(request.timer);
    request.resolve(message.text);
  }

  private fail(id: number, why: string): void {
    const request = this.pending.get(id);
    if (!request) return;
    this.pending.delete(id);
    clearTimeout(request.timer);
    // 503: the scrape fails (Prometheus marks it down) rather than showing one worker's counters as the group's.
    request.reject(new RlError('unavailable', `metrics of the worker group are unavailable: ${why}`));
  }
}
