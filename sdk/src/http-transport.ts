import http from 'node:http';
import https from 'node:https';
import { fieldOf, RateLimitAuthError, RateLimitError, RateLimitInputError } from './errors.js';
import { decisionFrom, ServiceUnavailable, type Transport } from './transport.js';
import type { Decision, Operation, RequestContext } from './types.js';

export interface HttpTransportOptions {
  /** Base URL of the service, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** Headers sent with every call (credentials). */
  headers: Record<string, string>;
  /** Sockets kept per host (default 64). */
  maxSockets?: number;
  /** CA bundle to trust for an `https:` URL with a private certificate. */
  ca?: string | Buffer;
}

const MAX_ANSWER_BYTES = 1024 * 1024;

/** Statuses that mean "your request is wrong", each answered with the typed error the caller must fix. */
const INPUT_STATUSES = new Set([400, 413, 415, 422]);

/**
 * JSON over HTTP/1.1 with one keep-alive pool (node:http Agent): no connection set-up per decision
 * once warm. Each call is bounded by `timeoutMs` from its start, connection included.
 */
export class HttpTransport implements Transport {
  private readonly base: URL;
  private readonly agent: http.Agent;
  private readonly request: typeof http.request;

  constructor(private readonly options: HttpTransportOptions) {
    try {
      this.base = new URL(options.url);
    } catch {
      throw new TypeError(`url: must be an absolute http(s) URL, got ${JSON.stringify(options.url)}`);
    }
    const secure = this.base.protocol === 'https:';
    if (!secure && this.base.protocol !== 'http:') throw new TypeError(`url: must be http: or https:, got ${this.base.protocol}`);
    const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? 64, scheduling: 'lifo' as const };
    this.agent = secure ? new https.Agent({ ...agentOptions, ca: options.ca }) : new http.Agent(agentOptions);
    this.request = secure ? https.request : http.request;
  }

  call(operation: Operation, ctx: RequestContext, timeoutMs: number): Promise<Decision> {
    const body = JSON.stringify(ctx);
    return new Promise<Decision>((resolve, reject) => {
      const req = this.request(
        new URL(`rl/v1/${operation}`, this.base.href.endsWith('/') ? this.base.href : `${this.base.href}/`),
        {
          method: 'POST',
          agent: this.agent,
          headers: { ...this.options.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            // A Decision is a few hundred bytes: anything this large is not the service talking.
            if (size > MAX_ANSWER_BYTES) fail(new ServiceUnavailable(`answer larger than ${MAX_ANSWER_BYTES} bytes`));
            else chunks.push(chunk);
          });
          res.on('error', (error) => fail(new ServiceUnavailable(`response aborted: ${error.message}`)));
          res.on('end', () => {
            clearTimeout(timer);
            try {
              resolve(answerOf(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8')));
            } catch (error) {
              reject(error);
            }
          });
        },
      );
      const fail = (error: Error) => {
        clearTimeout(timer);
        req.destroy();
        reject(error);
      };
      const timer = setTimeout(() => fail(new ServiceUnavailable(`no answer within ${timeoutMs} ms`)), timeoutMs);
      req.on('error', (error) => fail(error instanceof ServiceUnavailable ? error : new ServiceUnavailable(error.message)));
      req.end(body);
    });
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }
}

function answerOf(status: number, text: string): Decision {
  if (status === 200) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new ServiceUnavailable('the service answered 200 with a body that is not JSON');
    }
    return decisionFrom(parsed);
  }
  if (status >= 500 || status === 429 || status === 408) throw new ServiceUnavailable(`the service answered ${status}`);
  const message = errorMessage(text) ?? `the service answered ${status}`;
  if (status === 401 || status === 403) throw new RateLimitAuthError(message, status);
  if (INPUT_STATUSES.has(status)) throw new RateLimitInputError(message, status, fieldOf(message));
  throw new RateLimitError(`${message} (is the url the rate-limit service?)`, status);
}

function errorMessage(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { error?: unknown };
    return typeof body.error === 'string' ? body.error : undefined;
  } catch {
    return undefined;
  }
}
