/**
 * The IPC messages between the primary and its workers (node:cluster's channel, JSON). Every message
 * carries `rl` so the primary and the workers can tell ours from anything else on the channel.
 */

/**
 * One worker's registry as prom-client's `getMetricsAsJSON()` gives it at run time (its typings say
 * `type` is a numeric enum and `collect` is present; neither is true of the JSON).
 */
export type MetricsSnapshot = {
  name: string;
  help: string;
  type: string;
  aggregator: string;
  values: { labels: Record<string, string | number>; value: number; metricName?: string }[];
}[];

/** Worker → primary: listening on these ports and ready for traffic. */
export interface ReadyMessage {
  rl: 'ready';
  http: number;
  grpc: number;
}

/** Worker → primary: /metrics was asked here; please answer for the whole group. */
export interface MetricsRequestMessage {
  rl: 'metrics-request';
  id: number;
}

/** Primary → worker: send me your registry (for collection `id`). */
export interface MetricsCollectMessage {
  rl: 'metrics-collect';
  id: number;
}

/** Worker → primary: my registry, for collection `id`. */
export interface MetricsSnapshotMessage {
  rl: 'metrics-snapshot';
  id: number;
  metrics: MetricsSnapshot;
}

/** Primary → worker: the group's exposition for the worker's request `id`, or why there is none. */
export interface MetricsExpositionMessage {
  rl: 'metrics-exposition';
  id: number;
  text?: string;
  error?: string;
}

export type WorkerMessage = ReadyMessage | MetricsRequestMessage | MetricsSnapshotMessage;
export type PrimaryMessage = MetricsCollectMessage | MetricsExpositionMessage;

const WORKER_KINDS = new Set(['ready', 'metrics-request', 'metrics-snapshot']);
const PRIMARY_KINDS = new Set(['metrics-collect', 'metrics-exposition']);

export function isWorkerMessage(message: unknown): message is WorkerMessage {
  return typeof message === 'object' && message !== null && WORKER_KINDS.has((message as { rl?: unknown }).rl as string);
}

export function isPrimaryMessage(message: unknown): message is PrimaryMessage {
  return typeof message === 'object' && message !== null && PRIMARY_KINDS.has((message as { rl?: unknown }).rl as string);
}
