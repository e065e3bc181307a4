/**
 * Every `RL_*` variable the server and the sidecar read, declared once: its kind, default, bounds, a
 * line of help, and which of the two reads it. The readers (src/config.ts for the server,
 * src/agent/config.ts for the sidecar) take defaults and bounds from here, and refuse to read a name
 * that is not here; test/settings-readme.test.ts keeps README's two variables tables equal to it (names
 * and defaults). Adding a variable: one entry below, then one line in the reader that uses it.
 *
 * `shown`: the default as README's table words it, when it is not simply the value (`none` when unset;
 * README may explain a default after ": ").
 *
 * Not here: the `rl` CLI's client variables (RL_URL, RL_API_KEY, RL_TOKEN), which name the server a
 * client talks to rather than configure a service; docs/cli.md lists them with their flags.
 */
export type SettingReader = 'server' | 'agent';

interface Common {
  help: string;
  readers: readonly SettingReader[];
  shown?: string;
}

export type SettingSpec = Common &
  (
    | { kind: 'int'; default: number; min: number; max: number }
    | { kind: 'string'; default: string }
    | { kind: 'bool'; default: boolean }
    | { kind: 'oneOf'; choices: readonly string[]; default: string }
    | { kind: 'list'; default: readonly string[] }
    | { kind: 'listen'; default: string }
    /** Read by code of its own (a URL, an address, a secret, a rule across variables); `default` for README only. */
    | { kind: 'custom'; default?: string; min?: number; max?: number }
  );

const SERVER = ['server'] as const;
const AGENT = ['agent'] as const;
const BOTH = ['server', 'agent'] as const;

export const SETTINGS = {
  // The server
  RL_POLICY_FILE: {
    kind: 'custom',
    help: 'policy file that seeds an empty policy store',
    readers: SERVER,
    shown: 'examples/policies.json in memory mode; none with RL_COUNTERSTORE_ADDR',
  },
  RL_HTTP_ADDR: { kind: 'listen', default: ':8080', help: 'HTTP listen address [host]:port', readers: SERVER },
  RL_GRPC_ADDR: { kind: 'listen', default: ':9090', help: 'gRPC listen address [host]:port', readers: SERVER },
  RL_GRPC_MAX_MESSAGE_BYTES: { kind: 'int', default: 4 * 1024 * 1024, min: 1024, max: 1024 * 1024 * 1024, help: 'largest gRPC request message', readers: SERVER },
  RL_COUNTERSTORE_ADDR: {
    kind: 'custom',
    help: 'shared Redis for counters (and, for the server, policies)',
    readers: BOTH,
  },
  RL_COUNTERSTORE_TIMEOUT_MS: { kind: 'int', default: 100, min: 1, max: 60_000, help: 'deadline of one Redis call', readers: BOTH },
  RL_REGION: { kind: 'custom', help: "this server's region name ([a-z0-9-]{1,32})", readers: BOTH },
  RL_GLOBAL_COUNTERSTORE_ADDR: { kind: 'custom', help: 'the store every region reaches', readers: BOTH },
  RL_GLOBAL_COUNTERSTORE_TIMEOUT_MS: { kind: 'int', default: 1000, min: 1, max: 60_000, help: 'deadline of one global-store call', readers: BOTH },
  RL_LEASE_MAX_WAIT_MS: { kind: 'int', default: 100, min: 0, max: 10_000, help: "the longest a decision waits for its capacity lease's refill", readers: BOTH },
  RL_DENY_CACHE_SIZE: { kind: 'int', default: 10_000, min: 0, max: 10_000_000, help: 'Redis mode: counters whose refusal is answered in-process (0: off)', readers: SERVER },
  RL_DENY_CACHE_MAX_AGE_MS: { kind: 'int', default: 1_000, min: 1, max: 3_600_000, help: 'the longest one refusal answers before Redis is asked again', readers: SERVER },
  RL_KEY_PREFIX: { kind: 'string', default: 'rl:', help: 'prefix of every Redis key', readers: BOTH },
  RL_DATA_DIR: { kind: 'string', default: './data', help: 'single-node policy journal', readers: SERVER },
  RL_COUNTER_SNAPSHOT_SECS: { kind: 'int', default: 5, min: 0, max: 3600, help: 'memory mode: counters saved in RL_DATA_DIR this often, and on drain (0: off)', readers: SERVER },
  RL_WORKERS: { kind: 'custom', default: '1', min: 1, max: 1024, help: 'server processes sharing the ports (a count or auto)', readers: SERVER },
  RL_MAX_BODY_BYTES: { kind: 'int', default: 1024 * 1024, min: 1, max: 1024 * 1024 * 1024, help: 'largest HTTP request body, after inflation', readers: BOTH },
  RL_SHUTDOWN_DELAY_SECS: { kind: 'int', default: 5, min: 0, max: 3600, help: 'on SIGTERM: how long both listeners keep answering while not ready', readers: SERVER },
  RL_DRAIN_SECS: { kind: 'int', default: 10, min: 0, max: 3600, help: 'then how long in-flight requests get', readers: BOTH },
  RL_HTTP_HEADERS_TIMEOUT_SECS: { kind: 'int', default: 10, min: 1, max: 3600, help: 'a client must send its request headers within this long', readers: SERVER },
  RL_HTTP_REQUEST_TIMEOUT_SECS: { kind: 'int', default: 30, min: 1, max: 3600, help: 'a client must send its whole request within this long', readers: SERVER },
  RL_HTTP_KEEPALIVE_TIMEOUT_SECS: { kind: 'int', default: 5, min: 1, max: 3600, help: 'an idle keep-alive connection is closed after this long', readers: SERVER },
  RL_ENVOY_HEADERS: { kind: 'oneOf', choices: ['ietf', 'legacy', 'off'], default: 'ietf', help: 'rate-limit headers in Envoy RLS answers', readers: SERVER },
  RL_ENVOY_HEADER_DESCRIPTORS: { kind: 'oneOf', choices: ['limiting', 'all'], default: 'limiting', help: 'which descriptors those headers speak for', readers: SERVER },
  RL_RLQS_BUCKET_IDLE_SECS: { kind: 'int', default: 60, min: 1, max: 3600, help: 'an RLQS bucket with no request reported for this long is abandoned', readers: SERVER },
  RL_PLATFORM_LAYERS: { kind: 'list', default: ['platform'], help: 'policy layers only credentials not limited to organisations read and write', readers: SERVER },
  RL_ENVOY_CONSUME_ALL: { kind: 'bool', default: false, help: 'true: every descriptor of an Envoy call counts whatever the others answer', readers: SERVER },
  RL_METRICS_LABEL_CAP: { kind: 'int', default: 1000, min: 1, max: 1_000_000, help: 'distinct tenant / policy_id label values kept in metrics', readers: SERVER },
  RL_INVALIDATION_TARGETS: { kind: 'custom', help: 'comma-separated sidecar base URLs notified after every policy change', readers: SERVER },
  RL_INVALIDATION_TOKEN: { kind: 'custom', help: 'sent to those sidecars as Authorization: Bearer', readers: SERVER },
  RL_AUTH_ENABLED: { kind: 'bool', default: false, help: 'true requires credentials', readers: SERVER },
  RL_AUTH_MODE: { kind: 'custom', help: 'apikey or jwt', readers: SERVER },
  RL_AUTH_API_KEYS: { kind: 'custom', help: 'comma-separated key, key:role or key:role:org1|org2', readers: SERVER },
  RL_AUTH_JWT_SECRET: { kind: 'custom', help: 'HMAC secret for HS256 tokens', readers: SERVER },
  RL_AUTH_ROLE_CLAIM: { kind: 'string', default: 'role', help: 'JWT claim holding the role(s)', readers: SERVER },
  RL_AUTH_ORG_CLAIM: { kind: 'string', default: 'orgs', help: 'JWT claim naming the organisation(s) the token is limited to', readers: SERVER },
  RL_AUTH_EXEMPT_PATHS: { kind: 'list', default: ['/healthz', '/readyz'], help: 'comma-separated paths that need no credential', readers: SERVER },
  RL_TLS_ENABLED: { kind: 'bool', default: false, help: 'true serves HTTPS and gRPC over TLS', readers: SERVER },
  RL_TLS_CERT_FILE: { kind: 'custom', help: 'PEM certificate (chain)', readers: SERVER },
  RL_TLS_KEY_FILE: { kind: 'custom', help: 'PEM key', readers: SERVER },
  // The sidecar
  RL_AGENT_LISTEN: { kind: 'listen', default: ':18080', help: 'agent listen address', readers: AGENT },
  RL_UPSTREAM_HTTP: { kind: 'custom', default: 'http://127.0.0.1:8080', help: 'server base URL', readers: AGENT },
  RL_AGENT_SYNC_SECS: { kind: 'int', default: 30, min: 1, max: 86_400, help: 'policy sync interval', readers: AGENT },
  RL_AGENT_UPSTREAM_TIMEOUT_MS: { kind: 'int', default: 500, min: 1, max: 60_000, help: 'deadline of one forwarded decision', readers: AGENT },
  RL_AGENT_SYNC_TIMEOUT_MS: { kind: 'int', default: 5000, min: 1, max: 300_000, help: 'deadline of one policy fetch', readers: AGENT },
  RL_AGENT_API_KEY: { kind: 'custom', help: 'credential sent upstream as X-Api-Key', readers: AGENT },
  RL_AGENT_TOKEN: { kind: 'custom', help: 'credential sent upstream as Authorization: Bearer', readers: AGENT },
  RL_AGENT_INVALIDATE_TOKEN: { kind: 'custom', help: 'when set, POST /rl/v1/agent/invalidate needs it as a bearer token', readers: AGENT },
} as const satisfies Record<string, SettingSpec>;

export type SettingName = keyof typeof SETTINGS;

/** What a declared setting reads as. */
export type SettingValue<N extends SettingName> = (typeof SETTINGS)[N] extends { kind: 'int' }
  ? number
  : (typeof SETTINGS)[N] extends { kind: 'bool' }
    ? boolean
    : (typeof SETTINGS)[N] extends { kind: 'oneOf'; choices: readonly (infer C)[] }
      ? C
      : (typeof SETTINGS)[N] extends { kind: 'list' }
        ? string[]
        : (typeof SETTINGS)[N] extends { kind: 'listen' }
          ? { host: string | undefined; port: number }
          : string;

export function isSettingName(name: string): name is SettingName {
  return Object.prototype.hasOwnProperty.call(SETTINGS, name);
}

/** The default as README's table shows it: `shown`, else the value (a list joined by commas), else `none`. */
export function shownDefault(spec: SettingSpec): string {
  if (spec.shown !== undefined) return spec.shown;
  const value = spec.default;
  if (value === undefined) return 'none';
  return Array.isArray(value) ? value.join(',') : String(value);
}
