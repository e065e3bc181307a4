/**
 * A simulated Envoy rate_limit_quota filter: a grpc-js client of StreamRateLimitQuotas built from
 * Envoy's own protos (proto/envoy, client-side loader options), behaving as the protocol's comments
 * describe the data plane:
 * - a bucket's first request sends its first report at once: the stream subscribes to the bucket;
 * - until an assignment comes the bucket follows `noAssignment`, after one expires `expired`;
 * - an assignment whose strategy differs from the active one (or comes after it expired) ends it: the
 *   bucket's usage is reported, and the new one applied; the same strategy only extends the life;
 * - a token bucket starts full and fills continuously at tokens_per_fill per fill_interval;
 * - abandon_action erases the bucket, usage and all;
 * - every bucket's usage is reported every `reportEveryMs`.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_DIR, PROTO_FILES } from '../../src/grpc/protos.js';

export type Blanket = 'ALLOW_ALL' | 'DENY_ALL';

interface Duration {
  seconds?: number;
  nanos?: number;
}

interface Strategy {
  blanket_rule?: Blanket;
  token_bucket?: { max_tokens: number; tokens_per_fill?: { value?: number } | null; fill_interval?: Duration };
}

interface Action {
  bucket_id: { bucket: Record<string, string> };
  quota_assignment_action?: { assignment_time_to_live?: Duration; rate_limit_strategy?: Strategy };
  abandon_action?: object;
}

interface Bucket {
  id: Record<string, string>;
  key: string;
  allowed: number;
  denied: number;
  lastReport: number;
  active?: { strategy: Strategy; expiresAt: number; tokens: number; at: number };
}

export interface SimulatedEnvoyOptions {
  target: string;
  domain: string;
  reportEveryMs: number;
  apiKey?: string;
  noAssignment?: Blanket;
  expired?: Blanket;
}

const durationMs = (d: Duration | undefined) => (d ? Number(d.seconds ?? 0) * 1000 + Number(d.nanos ?? 0) / 1e6 : Infinity);

export class SimulatedEnvoy {
  /** Requests let through, over every bucket and the whole life of this Envoy. */
  admitted = 0;
  refused = 0;
  /** Assignments that only extended the active one's life (the same strategy again), and those that replaced it. */
  extended = 0;
  replaced = 0;
  /** Every action received, in order. */
  readonly actions: Action[] = [];
  /** The stream's end: its status (OK on a clean end). */
  readonly closed: Promise<grpc.StatusObject>;
  private readonly buckets = new Map<string, Bucket>();
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<object, Action[] | { bucket_action: Action[] }>;
  private readonly timer: NodeJS.Timeout;
  private readonly listeners: (() => void)[] = [];
  private ended = false;
  private silent = false;

  constructor(private readonly options: SimulatedEnvoyOptions) {
    const definition = protoLoader.loadSync(PROTO_FILES.rlqs, { keepCase: true, longs: Number, enums: String, defaults: false, oneofs: true, includeDirs: [PROTO_DIR] });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as { envoy: { service: { rate_limit_quota: { v3: { RateLimitQuotaService: grpc.ServiceClientConstructor } } } } };
    this.client = new pkg.envoy.service.rate_limit_quota.v3.RateLimitQuotaService(options.target, grpc.credentials.createInsecure());
    const metadata = new grpc.Metadata();
    if (options.apiKey) metadata.set('x-api-key', options.apiKey);
    const client = this.client as unknown as { StreamRateLimitQuotas(metadata: grpc.Metadata): SimulatedEnvoy['call'] };
    this.call = client.StreamRateLimitQuotas(metadata);
    this.call.on('data', (message: { bucket_action: Action[] }) => {
      for (const action of message.bucket_action) this.apply(action);
    });
    this.closed = new Promise((resolve) => this.call.on('status', resolve));
    this.call.on('error', () => undefined);
    this.timer = setInterval(() => this.reportAll(), options.reportEveryMs);
  }

  /** One request matched into `bucket`: admitted or not, as the bucket's state says now. */
  request(bucket: Record<string, string>): boolean {
    const key = JSON.stringify(Object.entries(bucket).sort());
    let state = this.buckets.get(key);
    const now = performance.now();
    const fresh = state === undefined;
    state ??= { id: bucket, key, allowed: 0, denied: 0, lastReport: now };
    if (fresh) this.buckets.set(key, state);
    const allowed = this.decide(state, now);
    if (allowed) state.allowed++;
    else state.denied++;
    if (allowed) this.admitted++;
    else this.refused++;
    if (fresh) this.report([state]);
    return allowed;
  }

  /** Resolves once an action arrives for which `test` holds (checked against every action so far first). */
  waitFor(test: (action: Action) => boolean): Promise<Action> {
    const found = this.actions.find(test);
    if (found) return Promise.resolve(found);
    return new Promise((resolve) => {
      const check = () => {
        const hit = this.actions.find(test);
        if (!hit) return;
        this.listeners.splice(this.listeners.indexOf(check), 1);
        resolve(hit);
      };
      this.listeners.push(check);
    });
  }

  /** The active strategy of a bucket (undefined: none, or expired). */
  activeStrategy(bucket: Record<string, string>): Strategy | undefined {
    const state = this.buckets.get(JSON.stringify(Object.entries(bucket).sort()));
    return state?.active && state.active.expiresAt > performance.now() ? state.active.strategy : undefined;
  }

  /** A clean shutdown: the last report, then the client's end of the stream; resolves with the server's status. */
  async close(): Promise<grpc.StatusObject> {
    if (!this.ended) {
      this.ended = true;
      clearInterval(this.timer);
      this.reportAll();
      this.call.end();
    }
    const status = await this.closed;
    this.client.close();
    return status;
  }

  /** Reports stop, the stream stays open (a hung data plane). */
  silence(): void {
    clearInterval(this.timer);
    this.silent = true;
  }

  /** The stream cut without a last report (a crash, a network cut). */
  cut(): void {
    this.ended = true;
    clearInterval(this.timer);
    this.call.cancel();
    this.client.close();
  }

  private decide(state: Bucket, now: number): boolean {
    const active = state.active;
    if (active === undefined) return (this.options.noAssignment ?? 'DENY_ALL') === 'ALLOW_ALL';
    if (active.expiresAt <= now) return (this.options.expired ?? 'DENY_ALL') === 'ALLOW_ALL';
    const bucket = active.strategy.token_bucket;
    if (bucket === undefined) return active.strategy.blanket_rule !== 'DENY_ALL';
    const perMs = (bucket.tokens_per_fill?.value || 1) / durationMs(bucket.fill_interval);
    active.tokens = Math.min(bucket.max_tokens, active.tokens + (now - active.at) * perMs);
    active.at = now;
    if (active.tokens < 1) return false;
    active.tokens -= 1;
    return true;
  }

  private apply(action: Action): void {
    this.actions.push(action);
    const state = this.buckets.get(JSON.stringify(Object.entries(action.bucket_id.bucket).sort()));
    if (state !== undefined && action.abandon_action) this.buckets.delete(state.key);
    const assignment = action.quota_assignment_action;
    if (state !== undefined && assignment) {
      const now = performance.now();
      const strategy = assignment.rate_limit_strategy ?? { blanket_rule: 'ALLOW_ALL' };
      const ttl = durationMs(assignment.assignment_time_to_live);
      const active = state.active;
      if (active && active.expiresAt > now && sameStrategy(active.strategy, strategy)) {
        active.expiresAt = now + ttl;
        this.extended++;
      } else {
        this.replaced++;
        if (active) this.report([state]);
        state.active = { strategy, expiresAt: now + ttl, tokens: strategy.token_bucket?.max_tokens ?? 0, at: now };
      }
    }
    for (const listener of [...this.listeners]) listener();
  }

  private reportAll(): void {
    this.report([...this.buckets.values()]);
  }

  private report(buckets: Bucket[]): void {
    if (buckets.length === 0 || this.silent || this.call.writableEnded) return;
    const now = performance.now();
    const usages = buckets.map((state) => {
      const elapsed = now - state.lastReport;
      const usage = {
        bucket_id: { bucket: state.id },
        time_elapsed: { seconds: Math.floor(elapsed / 1000), nanos: Math.round((elapsed % 1000) * 1e6) },
        num_requests_allowed: state.allowed,
        num_requests_denied: state.denied,
      };
      state.allowed = 0;
      state.denied = 0;
      state.lastReport = now;
      return usage;
    });
    this.call.write({ domain: this.options.domain, bucket_quota_usages: usages });
  }
}

/** As Envoy's filter compares them: the same blanket rule, or token buckets alike in max_tokens, tokens_per_fill and fill_interval's nanos. */
function sameStrategy(a: Strategy, b: Strategy): boolean {
  if (a.token_bucket === undefined || b.token_bucket === undefined) return a.token_bucket === b.token_bucket && (a.blanket_rule ?? 'ALLOW_ALL') === (b.blanket_rule ?? 'ALLOW_ALL');
  const [x, y] = [a.token_bucket, b.token_bucket];
  return x.max_tokens === y.max_tokens && (x.tokens_per_fill?.value ?? 1) === (y.tokens_per_fill?.value ?? 1) && Number(x.fill_interval?.nanos ?? 0) === Number(y.fill_interval?.nanos ?? 0);
}
