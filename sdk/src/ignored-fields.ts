import type { Decision } from './types.js';

/** Where the client's warnings go: anything with a `warn(message)`, such as `console` or a pino/winston logger. */
export interface ClientLogger {
  warn(message: string): void;
}

/** The default logger: `console.warn`, read at each call so a test or an app that replaces it is followed. */
export const consoleLogger: ClientLogger = { warn: (message) => console.warn(message) };

/** Distinct names remembered: past it, further names are not warned about (a client fed random keys cannot grow it). */
const MAX_REMEMBERED = 1024;

/**
 * Warns once per field name the service said it ignored (`metadata.ignored_fields`, README
 * "The request"): a misspelt RequestContext field matches no policy scope, so the request
 * is limited by none, and nothing else would say so.
 */
export class IgnoredFieldWarnings {
  private readonly warned = new Set<string>();

  constructor(private readonly logger: ClientLogger | undefined) {}

  /** Looks at one answer; returns it. Costs one property read when nothing was ignored. */
  note(decision: Decision): Decision {
    const names = decision.metadata?.ignored_fields;
    if (names === undefined || this.logger === undefined) return decision;
    for (const name of names.split(',')) {
      if (name === '' || this.warned.has(name) || this.warned.size >= MAX_REMEMBERED) continue;
      this.warned.add(name);
      this.logger.warn(
        `@rl/client: the rate-limit service ignored the request field ${JSON.stringify(name)}: it is not a RequestContext field ` +
          '(misspelt?), so no policy scope can match it (this warning is given once per name)',
      );
    }
    return decision;
  }
}
