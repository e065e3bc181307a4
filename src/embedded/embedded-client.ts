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
import { composeDecisionCore, type CoreSettings } from '../composition/decision-core.js';
import type { DecisionService, Operation } from '../decision/decision-service.js';
import { RlError } from '../errors.js';
import { ShutdownOrder } from '../lifecycle/shutdown-order.js';
import { parseOperationContext } from '../model/request-context.js';
import { loadPolicyFile, parsePolicyDocument } from '../policy/policy-file.js';
import type { Policy } from '../policy/types.js';
import { SETTINGS } from '../settings.js';

export interface EmbeddedClientOptions {
  /**
   * Policies: a policy file path, or the policies themselves (`{policies: [...]}` or an array, as in a
   * policy file). Required in memory mode; in Redis mode they seed a store that holds none yet.
   */
  policies?: string | unknown[] | { policies: unknown[] };
  /** The service's shared Redis: `RL_COUNTERSTORE_ADDR` syntax. Absent: memory mode. */
  redisAddr?: string;
  /** The service's `RL_KEY_PREFIX` (the same default): the same prefix shares its policies and counters. */
  keyPrefix?: string;
  /** Redis command timeout, ms (the service's RL_COUNTERSTORE_TIMEOUT_MS, and its default). */
  commandTimeoutMs?: number;
  /** Where warnings go, as the SDK client's `logger` (default `console`; `false`: nowhere). */
  logger?: ClientLogger | false;
}

/** An embedded client; `close()` releases its Redis connections and timers. */
export type EmbeddedClient = RateLimitClient;

export async function createEmbeddedClient(options: EmbeddedClientOptions): Promise<EmbeddedClient> {
  const redisAddr = options.redisAddr;
  if (redisAddr === undefined && options.policies === undefined) throw new TypeError('policies: required in memory mode (no redisAddr)');
  const seed = options.policies;
  // One order for a start-up that fails half-way and for close(): what opened last closes first.
  const shutdown = new ShutdownOrder();
  return shutdown.opening(async () => {
    const { decisions } = await composeDecisionCore(embeddedCoreSettings(options), {
      shutdown,
      // Redis mode follows every change the service's nodes make (pub/sub and the revision check).
      policies: redisAddr === undefined ? { from: 'list', policies: policiesFrom(seed!) } : { from: 'store', seed: seed === undefined ? undefined : () => policiesFrom(seed) },
    });
    const warnings = new IgnoredFieldWarnings(options.logger === false ? undefined : (options.logger ?? consoleLogger));
    return new InProcessClient(decisions, warnings, () => shutdown.close());
  });
}

/** The service's own defaults (its settings table) for whatever the options leave out. */
export function embeddedCoreSettings(options: EmbeddedClientOptions): CoreSettings {
  return {
    counterStoreAddr: options.redisAddr,
    keyPrefix: options.keyPrefix ?? SETTINGS.RL_KEY_PREFIX.default,
    counterStoreTimeoutMs: options.commandTimeoutMs ?? SETTINGS.RL_COUNTERSTORE_TIMEOUT_MS.default,
    leaseMaxWaitMs: SETTINGS.RL_LEASE_MAX_WAIT_MS.default,
    denyCache: { size: SETTINGS.RL_DENY_CACHE_SIZE.default, maxAgeMs: SETTINGS.RL_DENY_CACHE_MAX_AGE_MS.default },
  };
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
