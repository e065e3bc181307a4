import { createAdminClient, type AdminClient } from '@rl/client';
import { CliError } from './exit-codes.js';

/** The global options every command takes (flags win over the environment). */
export interface GlobalOptions {
  url?: string;
  /** `--auth-key`: this service's API key (never the request field api_key). */
  authKey?: string;
  token?: string;
  timeout?: string;
  json?: boolean;
}

export interface Connection {
  url: string;
  apiKey?: string;
  token?: string;
  timeoutMs: number;
}

const DEFAULT_URL = 'http://127.0.0.1:8080';
const DEFAULT_TIMEOUT_MS = 10_000;

/** `--url` / RL_URL, `--auth-key` / RL_API_KEY, `--token` / RL_TOKEN, `--timeout` (ms); flags win. */
export function resolveConnection(options: GlobalOptions, env: NodeJS.ProcessEnv = process.env): Connection {
  const url = (options.url ?? env.RL_URL ?? DEFAULT_URL).trim();
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(`--url: not a URL: ${JSON.stringify(url)} (expected e.g. ${DEFAULT_URL})`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new CliError(`--url: must be an http:// or https:// URL, got ${JSON.stringify(url)}`);
  }
  const connection: Connection = { url, timeoutMs: parseTimeout(options.timeout) };
  // A credential flag replaces both variables: `--token T` with RL_API_KEY set means the token.
  const byFlag = options.authKey !== undefined || options.token !== undefined;
  const apiKey = byFlag ? options.authKey : nonEmpty(env.RL_API_KEY);
  const token = byFlag ? options.token : nonEmpty(env.RL_TOKEN);
  // The server reads X-Api-Key first in apikey mode and the bearer token in jwt mode: sending both hides mistakes.
  if (apiKey && token) throw new CliError('give one credential: --auth-key / RL_API_KEY or --token / RL_TOKEN, not both');
  if (apiKey) connection.apiKey = apiKey;
  if (token) connection.token = token;
  return connection;
}

export function adminClient(options: GlobalOptions): AdminClient {
  return createAdminClient(resolveConnection(options));
}

function parseTimeout(text: string | undefined): number {
  if (text === undefined) return DEFAULT_TIMEOUT_MS;
  if (!/^[1-9][0-9]{0,6}$/.test(text)) throw new CliError(`--timeout: must be a positive number of milliseconds, got ${JSON.stringify(text)}`);
  return Number(text);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}
