import cluster, { type Worker } from 'node:cluster';
import type { ServerConfig } from '../config.js';
import { log } from '../util/log.js';
import type { Started } from '../util/run-main.js';
import { aggregateGroupMetrics, type WorkerSnapshot } from './aggregate-metrics.js';
import { isWorkerMessage, type MetricsSnapshot, type PrimaryMessage } from './messages.js';
import { RestartBackoff } from './restart-backoff.js';

/** A worker died before the group was first ready: the config or the environment is wrong, not bad luck. */
export class WorkerStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WorkerStartError';
  }
}

/** How long the primary waits for every worker's registry before answering /metrics with an error. */
const COLLECT_TIMEOUT_MS = 5_000;
/** Beyond RL_SHUTDOWN_DELAY_SECS + RL_DRAIN_SECS, the time a worker may take to close its stores and exit. */
const EXIT_MARGIN_MS = 10_000;

/**
 * The primary of RL_WORKERS > 1: forks the workers (node:cluster shares the HTTP and gRPC listening
 * sockets among them), answers /metrics for the group, restarts a worker that dies, and drains them all.
 * It serves no traffic itself. runMain gives it the same signals and exit codes as a single server.
 */
export async function startWorkerGroup(config: ServerConfig): Promise<Started> {
  const group = new WorkerGroup(config.workers, (config.shutdownDelaySecs + config.drainSecs) * 1000 + EXIT_MARGIN_MS);
  await group.start();
  return { drainSecs: config.drainSecs, shutdownDelaySecs: config.shutdownDelaySecs, drain: () => group.stop() };
}

interface Slot {
  /** 1..N: the `worker` label, stable across restarts. */
  readonly index: number;
  readonly backoff: RestartBackoff;
  worker?: Worker;
  ready: boolean;
  startedAt: number;
  restartTimer?: NodeJS.Timeout;
}

/** One /metrics answer being put together: who asked, and the registries still awaited. */
interface Collection {
  id: number;
  requester: Worker;
  requestId: number;
  awaiting: Set<number>;
  snapshots: WorkerSnapshot[];
  timer: NodeJS.Timeout;
}

type Phase = 'starting' | 'running' | 'stopping';

class WorkerGroup {
  private readonly slots: Slot[];
  private phase: Phase = 'starting';
  private restarts = 0;
  private nextCollection = 0;
  private readonly collections = new Map<number, Collection>();
  private started?: { resolve: () => void; reject: (error: Error) => void };
  private stopped?: { resolve: () => void; reject: (error: Error) => void };
  private readonly failedExits: string[] = [];

  constructor(
    count: number,
    private readonly stopBoundMs: number,
  ) {
    this.slots = Array.from({ length: count }, (_, i) => ({ index: i + 1, backoff: new RestartBackoff(), ready: false, startedAt: 0 }));
  }

  /** Resolves when every worker is ready; rejects (after killing the others) if one dies first. */
  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.started = { resolve, reject };
      for (const slot of this.slots) this.fork(slot);
    });
  }

  /**
   * SIGTERM to every worker: each fails readiness at once, keeps answering for RL_SHUTDOWN_DELAY_SECS,
   * drains and exits. Resolves when all have exited 0; rejects if any did not, or if they outlive the bound.
   */
  stop(): Promise<void> {
    this.phase = 'stopping';
    for (const slot of this.slots) clearTimeout(slot.restartTimer);
    const running = this.slots.filter((slot) => slot.worker);
    for (const slot of running) slot.worker!.process.kill('SIGTERM');
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        for (const slot of this.slots) slot.worker?.process.kill('SIGKILL');
        reject(new Error(`workers still running ${this.stopBoundMs} ms after SIGTERM were killed`));
      }, this.stopBoundMs);
      this.stopped = {
        resolve: () => (clearTimeout(timer), resolve()),
        reject: (error) => (clearTimeout(timer), reject(error)),
      };
      this.settleStop();
    });
  }

  private fork(slot: Slot): void {
    const worker = cluster.fork();
    slot.worker = worker;
    slot.ready = false;
    slot.startedAt = Date.now();
    log.info('worker starting', { worker: slot.index, pid: worker.process.pid });
    worker.on('message', (message: unknown) => this.onMessage(slot, worker, message));
    worker.on('exit', (code: number | null, signal: string | null) => this.onExit(slot, worker, code, signal));
  }

  private onMessage(slot: Slot, worker: Worker, message: unknown): void {
    if (!isWorkerMessage(message) || slot.worker !== worker) return;
    switch (message.rl) {
      case 'ready':
        slot.ready = true;
        log.info('worker ready', { worker: slot.index, pid: worker.process.pid, http: message.http, grpc: message.grpc });
        if (this.phase === 'starting' && this.slots.every((s) => s.ready)) {
          this.phase = 'running';
          log.info('workers ready', { workers: this.slots.length, http: message.http, grpc: message.grpc });
          this.started?.resolve();
        }
        return;
      case 'metrics-request':
        return this.collect(worker, message.id);
      case 'metrics-snapshot':
        return this.addSnapshot(message.id, slot.index, message.metrics);
    }
  }

  private onExit(slot: Slot, worker: Worker, code: number | null, signal: string | null): void {
    if (slot.worker !== worker) return;
    const pid = worker.process.pid;
    const wasReady = slot.ready;
    slot.worker = undefined;
    slot.ready = false;
    for (const collection of this.collections.values()) {
      if (collection.awaiting.delete(slot.index)) this.finishIfComplete(collection);
    }
    if (this.phase === 'starting') {
      this.phase = 'stopping';
      for (const other of this.slots) other.worker?.process.kill('SIGKILL');
      this.started?.reject(new WorkerStartError(`worker ${slot.index} (pid ${pid}) exited (code ${code}, signal ${signal}) before it was ready; its log says why`));
      return;
    }
    if (this.phase === 'stopping') {
      log.info('worker stopped', { worker: slot.index, pid, code, signal });
      // A worker still starting has no SIGTERM handler yet: the signal ends it, and that is a clean stop too.
      const clean = code === 0 || (!wasReady && signal === 'SIGTERM');
      if (!clean) this.failedExits.push(`worker ${slot.index} exited with code ${code}, signal ${signal}`);
      this.settleStop();
      return;
    }
    const delay = slot.backoff.next(Date.now() - slot.startedAt);
    this.restarts++;
    log.warn('worker exited unexpectedly; restarting it', { worker: slot.index, pid, code, signal, restart_in_ms: delay });
    slot.restartTimer = setTimeout(() => {
      slot.restartTimer = undefined;
      if (this.phase === 'running') this.fork(slot);
    }, delay);
  }

  private settleStop(): void {
    if (!this.stopped || this.slots.some((slot) => slot.worker)) return;
    if (this.failedExits.length > 0) this.stopped.reject(new Error(this.failedExits.join('; ')));
    else this.stopped.resolve();
  }

  /** Asks every ready worker for its registry; the answer goes back to the worker that was scraped. */
  private collect(requester: Worker, requestId: number): void {
    const targets = this.slots.filter((slot) => slot.ready && slot.worker?.isConnected());
    const id = ++this.nextCollection;
    const collection: Collection = {
      id,
      requester,
      requestId,
      awaiting: new Set(targets.map((slot) => slot.index)),
      snapshots: [],
      timer: setTimeout(() => this.finish(collection, `worker ${[...collection.awaiting].join(', ')} did not answer`), COLLECT_TIMEOUT_MS),
    };
    this.collections.set(id, collection);
    for (const slot of targets) sendTo(slot.worker!, { rl: 'metrics-collect', id });
    this.finishIfComplete(collection);
  }

  private addSnapshot(id: number, slot: number, metrics: MetricsSnapshot): void {
    const collection = this.collections.get(id);
    if (!collection?.awaiting.delete(slot)) return;
    collection.snapshots.push({ slot, metrics });
    this.finishIfComplete(collection);
  }

  /** Complete once every awaited worker answered or exited (an exited worker's counters are gone with it). */
  private finishIfComplete(collection: Collection): void {
    if (collection.awaiting.size === 0) this.finish(collection);
  }

  private finish(collection: Collection, error?: string): void {
    if (this.collections.get(collection.id) !== collection) return;
    clearTimeout(collection.timer);
    this.collections.delete(collection.id);
    const { requester, requestId } = collection;
    if (error !== undefined) {
      log.warn('group metrics incomplete', { error });
      return sendTo(requester, { rl: 'metrics-exposition', id: requestId, error });
    }
    const facts = { workers: this.slots.filter((slot) => slot.ready).length, restarts: this.restarts };
    Promise.resolve()
      .then(() => aggregateGroupMetrics(collection.snapshots, facts).metrics())
      .then(
        (text) => sendTo(requester, { rl: 'metrics-exposition', id: requestId, text }),
        (cause: unknown) => sendTo(requester, { rl: 'metrics-exposition', id: requestId, error: String(cause) }),
      );
  }
}

function sendTo(worker: Worker, message: PrimaryMessage): void {
  // A worker that has just exited can still be the requester of a collection in flight.
  if (worker.isConnected()) worker.send(message);
}
