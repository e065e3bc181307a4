import { AdminApiError, AdminConnectionError, RateLimitError } from '@rl/client';
import { CliError, EXIT_CONFLICT_OR_INVALID, EXIT_ERROR } from './exit-codes.js';

/** What `rl` prints and exits with for a failure: one headline, optional detail lines, a JSON twin. */
export interface ErrorReport {
  exitCode: number;
  headline: string;
  details: string[];
  json: Record<string, unknown>;
}

/** Statuses that mean "your input or your view of the data is wrong": exit 2. */
const CONFLICT_OR_INVALID = new Set([400, 409, 413, 415, 422]);

/** One clear line per failure, naming what to do where there is something to do. */
export function reportError(error: unknown): ErrorReport {
  if (error instanceof CliError) {
    return { exitCode: error.exitCode, headline: error.message, details: error.details, json: { error: error.message, ...error.extra } };
  }
  if (error instanceof AdminConnectionError) {
    const headline = `cannot reach ${error.url}: ${connectionReason(error.reason)} (set RL_URL or --url)`;
    return { exitCode: EXIT_ERROR, headline, details: [], json: { error: headline, reason: error.reason, url: error.url } };
  }
  if (error instanceof AdminApiError) {
    const details = error.fieldErrors.map((e) => `${e.field}: ${e.message}`);
    const headline = `${statusHeadline(error.status)}: ${error.serverMessage}`;
    const exitCode = CONFLICT_OR_INVALID.has(error.status) ? EXIT_CONFLICT_OR_INVALID : EXIT_ERROR;
    const json: Record<string, unknown> = { error: error.serverMessage, status: error.status };
    if (error.fieldErrors.length > 0) json.errors = error.fieldErrors;
    return { exitCode, headline, details, json };
  }
  if (error instanceof RateLimitError) {
    // The SDK's decision client: status 0 means no answer came (refused, timeout, circuit open).
    if (error.status === 0) return { exitCode: EXIT_ERROR, headline: error.message, details: [], json: { error: error.message } };
    const exitCode = CONFLICT_OR_INVALID.has(error.status) ? EXIT_CONFLICT_OR_INVALID : EXIT_ERROR;
    const headline = `${statusHeadline(error.status)}: ${error.message}`;
    return { exitCode, headline, details: [], json: { error: error.message, status: error.status } };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { exitCode: EXIT_ERROR, headline: message, details: [], json: { error: message } };
}

/** The status as words plus what usually fixes it. */
export function statusHeadline(status: number): string {
  switch (status) {
    case 400:
      return 'bad request (400)';
    case 401:
      return 'not authenticated (401; set RL_API_KEY or RL_TOKEN, or pass --auth-key/--token)';
    case 403:
      return 'permission denied (403; this needs a credential with the admin role)';
    case 404:
      return 'not found (404)';
    case 409:
      return 'conflict (409; read the current version and try again)';
    case 413:
      return 'request too large (413)';
    case 415:
      return 'unsupported media type (415)';
    case 422:
      return 'invalid policy (422)';
    case 503:
      return 'service unavailable (503)';
    default:
      return status >= 500 ? `server error (${status})` : `HTTP ${status}`;
  }
}

function connectionReason(reason: string): string {
  switch (reason) {
    case 'ECONNREFUSED':
      return 'connection refused (is the server running on that address?)';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `unknown host (${reason})`;
    case 'timeout':
      return 'no answer before the timeout (--timeout)';
    case 'ECONNRESET':
      return 'the connection was reset (plain HTTP to a TLS port, or the reverse?)';
    default:
      return reason;
  }
}
