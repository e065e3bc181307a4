/**
 * The SDK's client interface answered in-process by this service's own DecisionService, for
 * applications that want no network hop. Same decisions as the service (same code, same scripts):
 *
 * - memory mode: policies given here, counters in this process (one process's limits);
 * - Redis mode: policies and counters in the service's shared Redis under its key prefix, so the
 *   application and every server node count against the same limits, and policy changes made
 *   through the service's API reach this client as they reach the servers.
 *
 * The dependency points one way (the SDK must stay free of the server's code): this module
 * implements the SDK's RateLimitClient; the SDK knows nothing of it.
 */
import { IgnoredFieldWarnings, RateLimitInputError, consoleLogger, type ClientLogger, type Decision as ClientDecision, type RateLimitClient, type RequestContext as ClientContext } from '@rl/client';
import type { CounterStore } from '../counters/counter-store.js';
import { MemoryCounterStore } from '../counters/memory-store.js';
import { connectRedisCounterStore } from '../counters/redis-store.js';
import { DecisionService, type Operation } from '../decision/decision-service.js';
import { RlError } from '../errors.js';
import { parseOperationContext } from '../model/request-context.js';
import { LiveMatcher } from '../matching/live-matcher.js';
import { loadPolicyFile, parsePolicyDocument } from '../policy/policy-file.js';
import { PolicyService } from '../policy-service/policy-service.js';
import type { Policy } from '../policy/types.js';
import { RedisPolicyStore } from '../policy-store/redis-policy-store.js';

export interface EmbeddedClientOptions {
  /**
   * Policies: a policy file path, or the policies themselves (`{policies: [...]}` or an array, as in a
   * policy file). Required in memory mode; in Redis mode they seed a store that holds none yet.
   */
  policies?: string | unknown[] | { policies: unknown[] };
  /** The service's shared Redis: `RL_COUNTERSTORE_ADDR` syntax. Absent: memory mode. */
  redisAddr?: string;
  /** The service's `RL_KEY_PREFIX` (default `rl:`): the same prefix shares its policies and counters. */
  keyPrefix?: string;
  /** Redis command timeout, ms (the service's RL_COUNTERSTORE_TIMEOUT_MS; default 100). */
  commandTimeoutMs?: number;
  /** Where warnings go, as the SDK client's `logger` (default `console`; `false`: nowhere). */
  logger?: ClientLogger | false;
}

/** An embedded client; `close()` releases its Redis connections and timers. */
export type EmbeddedClient = RateLimitClient;

export async function createEmbeddedClient(options: EmbeddedClientOptions): Promise<EmbeddedClient> {
  const keyPrefix = options.keyPrefix ?? 'rl:';
  const matcher = new LiveMatcher();
  const commandTimeoutMs = options.commandTimeoutMs ?? 100;
  let counters: CounterStore;
  let closePolicies: () => Promise<void>;
  if (options.redisAddr !== undefined) {
    const store = await RedisPolicyStore.open({ addr: options.redisAddr, keyPrefix });
    const seed = options.policies;
    if (seed !== undefined) await store.seedIfEmpty(() => policiesFrom(seed));
    // Follows every change the service's nodes make (pub/sub and the revision check).
    const policies = new PolicyService({ store, matcher });
    counters = connectRedisCounterStore(options.redisAddr, { commandTimeoutMs });
    closePolicies = async () => {
      policies.close();
      await store.close();
    };
  } else {
    if (options.policies === undefined) throw new TypeError('policies: required in memory mode (no redisAddr)');
    matcher.replace(policiesFrom(options.policies));
    counters = new MemoryCounterStore();
    closePolicies = async () => undefined;
  }
  const decisions = new DecisionService({ policies: matcher, counters, keyPrefix, leases: { takeTimeoutMs: commandTimeoutMs } });
  const warnings = new IgnoredFieldWarnings(options.logger === false ? undefined : (options.logger ?? consoleLogger));
  return new InProcessClient(decisions, warnings, async () => {
    await closePolicies();
    await decisions.letGoLeases();
    await counters.close();
  });
}

function policiesFrom(source: NonNullable<EmbeddedClientOptions['policies']>): Policy[] {
  return typeof source === 'string' ? loadPolicyFile(source) : parsePolicyDocument('(embedded client policies)', source);
}

class InProcessClient implements EmbeddedClient {
  private closed?: Promise<void>;

  constructor(
    private readonly decisions: DecisionService,
    private readonly ignoredFields: IgnoredFieldWarnings,
    private readonly shutdown: () => Promise<void>,
  ) {}

  check(ctx: ClientContext): Promise<ClientDecision> {
    return this.decide('check', ctx);
  }

  peek(ctx: ClientContext): Promise<ClientDecision> {
    return this.decide('check', { ...ctx, quantity: 0 });
  }

  acquire(ctx: ClientContext): Promise<ClientDecision> {
    return this.decide('acquire', ctx);
  }

  release(ctx: ClientContext): Promise<ClientDecision> {
    return this.decide('release', ctx);
  }

  refund(ctx: ClientContext): Promise<ClientDecision> {
    return this.decide('refund', ctx);
  }

  close(): Promise<void> {
    this.closed ??= this.shutdown();
    return this.closed;
  }

  /** The service's own validation and decision; its input errors become the SDK's typed error. */
  private async decide(operation: Operation, ctx: ClientContext): Promise<ClientDecision> {
    try {
      const request = parseOperationContext(operation, ctx);
      return this.ignoredFields.note(await this.decisions.decideNow(operation, request));
    } catch (error) {
      if (error instanceof RlError && error.kind === 'invalid_argument') throw new RateLimitInputError(error.message, 400, error.field);
      throw error;
    }
  }
}
