/**
 * Authentication and authorisation, free of any transport: the Koa guard (http/auth-guard.ts) and the
 * gRPC handlers both hand over the raw credential headers / metadata and get a Principal back, or a
 * typed RlError ('unauthenticated' → 401 / UNAUTHENTICATED, 'permission_denied' → 403 /
 * PERMISSION_DENIED) that each transport maps in its one error mapping.
 *
 * Secrets never leave this module: error messages are fixed strings, an API key's subject is a short
 * SHA-256 fingerprint, and configured keys are kept only as digests.
 */
import jwt from 'jsonwebtoken';
import type { AuthConfig, Role } from '../config.js';
import { RlError } from '../errors.js';
import { isOrgName, type Actor } from '../model/org-scope.js';
import { matchesSecret, secretDigest } from '../util/secrets.js';

/**
 * Who is calling. `role` is null for a valid JWT that carries neither `admin` nor `read-only` in the
 * role claim: it is authenticated (it may make decision calls, which need "any valid credential") but
 * every read or management call is 403. `orgs` present: the credential acts only for those
 * organisations (model/org-scope.ts applies the rule); absent: every organisation.
 */
export type Principal = Actor & { role: Role | null };

/**
 * What a call needs:
 * - `decide`: check / acquire / release — any authenticated caller;
 * - `read`:   GET/HEAD routes and POST /policies/validate — admin or read-only;
 * - `write`:  every other management call (POST/PUT/PATCH/DELETE) — admin.
 */
export type Access = 'read' | 'decide' | 'write';

/** The raw credentials as they arrived: `X-Api-Key` / `x-api-key` and `Authorization` / `authorization`. */
export interface Credentials {
  apiKey?: string;
  authorization?: string;
}

/**
 * The credentials of a gRPC call (`x-api-key`, `authorization` metadata; first value of each).
 * Structurally typed so this module does not depend on grpc-js: pass `call.metadata`.
 */
export function credentialsFromMetadata(metadata: { get(key: string): (string | Buffer)[] }): Credentials {
  const credentials: Credentials = {};
  const first = (key: string): string | undefined => {
    const value = metadata.get(key)[0];
    return typeof value === 'string' && value !== '' ? value : undefined;
  };
  const apiKey = first('x-api-key');
  if (apiKey !== undefined) credentials.apiKey = apiKey;
  const authorization = first('authorization');
  if (authorization !== undefined) credentials.authorization = authorization;
  return credentials;
}

/** The principal used when RL_AUTH_ENABLED is false. */
export const ANONYMOUS: Principal = Object.freeze({ subject: 'anonymous', role: 'admin' }) as Principal;

interface KeyEntry {
  digest: Buffer;
  /** What a match authenticates as: built once, shared by every call with this key. */
  principal: Principal;
}

const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;

/** `key:` + the first 8 hex chars of the key's SHA-256: stable for audits, not the key. */
export function apiKeyFingerprint(key: string): string {
  return `key:${secretDigest(key).toString('hex').slice(0, 8)}`;
}

function unauthenticated(message: string): RlError {
  return new RlError('unauthenticated', message);
}

export class Authenticator {
  readonly enabled: boolean;
  readonly mode: AuthConfig['mode'];
  /** Whether some credential may be limited to organisations (a JWT may always carry the claim). */
  readonly mayLimitOrgs: boolean;
  private readonly keys: KeyEntry[];
  private readonly jwtSecret: string | undefined;
  private readonly roleClaim: string;
  private readonly orgClaim: string;

  constructor(config: AuthConfig) {
    this.enabled = config.enabled;
    this.mode = config.mode;
    this.roleClaim = config.roleClaim;
    this.orgClaim = config.orgClaim;
    this.keys = config.apiKeys.map(({ key, role, orgs }) => ({
      digest: secretDigest(key),
      principal: Object.freeze(orgs ? { subject: apiKeyFingerprint(key), role, orgs: Object.freeze([...orgs]) } : { subject: apiKeyFingerprint(key), role }),
    }));
    this.jwtSecret = config.jwtSecret;
    this.mayLimitOrgs = this.enabled && (this.mode === 'jwt' || this.keys.some((k) => k.principal.orgs !== undefined));
    // config.ts already refuses these at start-up; repeated here so a hand-built config cannot open the door.
    if (this.enabled) {
      if (this.mode === 'apikey' && this.keys.length === 0) throw new Error('auth: apikey mode without any key');
      if (this.mode === 'jwt' && !this.jwtSecret) throw new Error('auth: jwt mode without a secret');
      if (this.mode !== 'apikey' && this.mode !== 'jwt') throw new Error('auth: enabled without a mode');
    }
  }

  /**
   * The `WWW-Authenticate` challenge of a 401 (RFC 7235 / RFC 6750). `presented` = the caller sent a
   * credential that was refused (adds `error="invalid_token"` in JWT mode).
   */
  challenge(presented: boolean): string {
    if (this.mode === 'jwt') return presented ? 'Bearer realm="rl", error="invalid_token"' : 'Bearer realm="rl"';
    return 'ApiKey realm="rl"';
  }

  /** Who is calling; throws RlError 'unauthenticated' (message never contains the credential). */
  authenticate(credentials: Credentials): Principal {
    if (!this.enabled) return ANONYMOUS;
    return this.mode === 'jwt' ? this.authenticateJwt(credentials) : this.authenticateApiKey(credentials);
  }

  /** Throws RlError 'permission_denied' when the principal's role does not allow `access`. */
  authorize(principal: Principal, access: Access): void {
    if (principal.role === 'admin') return;
    if (access === 'decide') return;
    if (access === 'read' && principal.role === 'read-only') return;
    if (principal.role === null) {
      throw new RlError('permission_denied', 'the credential carries no known role (admin or read-only)');
    }
    throw new RlError('permission_denied', 'this call needs the admin role');
  }

  /** `X-Api-Key` wins when present; otherwise `Authorization: Bearer <key>`. */
  private authenticateApiKey(credentials: Credentials): Principal {
    const presented = presentedApiKey(credentials);
    if (presented === undefined) {
      throw unauthenticated('missing credentials: send X-Api-Key or Authorization: Bearer <key>');
    }
    // Constant time per key (matchesSecret), and every configured key is compared (no early exit),
    // so neither the length of the presented key nor the position of a match leaks.
    let match: KeyEntry | undefined;
    for (const entry of this.keys) {
      const equal = matchesSecret(presented, entry.digest);
      if (equal && match === undefined) match = entry;
    }
    if (!match) throw unauthenticated('invalid API key');
    return match.principal;
  }

  private authenticateJwt(credentials: Credentials): Principal {
    const authorization = credentials.authorization?.trim();
    if (!authorization) throw unauthenticated('missing credentials: send Authorization: Bearer <jwt>');
    const m = BEARER.exec(authorization);
    if (!m) throw unauthenticated('the Authorization header must be "Bearer <jwt>"');
    let payload: string | jwt.JwtPayload;
    try {
      payload = jwt.verify(m[1]!, this.jwtSecret!, { algorithms: ['HS256'] });
    } catch (error) {
      throw unauthenticated(jwtFailure(error));
    }
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
      throw unauthenticated('invalid token: the payload is not a JSON object');
    }
    const sub = payload.sub;
    const subject = typeof sub === 'string' && sub !== '' ? sub : 'jwt';
    const role = roleOf(payload[this.roleClaim]);
    if (!Object.prototype.hasOwnProperty.call(payload, this.orgClaim)) return { subject, role };
    return { subject, role, orgs: orgsOf(payload[this.orgClaim], this.orgClaim) };
  }
}

function presentedApiKey(credentials: Credentials): string | undefined {
  const header = credentials.apiKey?.trim();
  if (header) return header;
  const authorization = credentials.authorization?.trim();
  if (!authorization) return undefined;
  const m = BEARER.exec(authorization);
  if (!m) throw unauthenticated('the Authorization header must be "Bearer <key>"');
  return m[1];
}

/** A string or an array of strings; admin wins over read-only; anything else is no role. */
function roleOf(claim: unknown): Role | null {
  const values = typeof claim === 'string' ? [claim] : Array.isArray(claim) ? claim : [];
  if (values.includes('admin')) return 'admin';
  if (values.includes('read-only')) return 'read-only';
  return null;
}

/**
 * The organisations claim: one name or an array of names. A claim that is there but names nothing
 * usable (another type, an empty or `*` name) refuses the token rather than reading it as unrestricted.
 */
function orgsOf(claim: unknown, name: string): string[] {
  const values = typeof claim === 'string' ? [claim] : Array.isArray(claim) ? claim : undefined;
  if (values === undefined || !values.every((v): v is string => typeof v === 'string' && isOrgName(v))) {
    throw unauthenticated(`invalid token: the "${name}" claim must be an organisation name or an array of them (not empty, not "*")`);
  }
  return [...new Set(values)];
}

/**
 * A fixed message per failure. jsonwebtoken's own messages are mostly fixed too, but some embed claim
 * values or dates; nothing from the token is echoed here.
 */
function jwtFailure(error: unknown): string {
  if (error instanceof jwt.TokenExpiredError) return 'invalid token: expired';
  if (error instanceof jwt.NotBeforeError) return 'invalid token: not yet valid (nbf)';
  if (error instanceof jwt.JsonWebTokenError) {
    const message = error.message;
    if (message === 'invalid algorithm') return 'invalid token: only HS256 is accepted';
    if (message === 'jwt signature is required') return 'invalid token: unsigned tokens are not accepted';
    if (message === 'invalid signature') return 'invalid token: bad signature';
    if (message === 'jwt malformed' || message === 'invalid token' || message.startsWith('Unexpected token')) {
      return 'invalid token: malformed';
    }
  }
  return 'invalid token';
}
