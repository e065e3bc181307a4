import { CounterStoreAddressError, parseCounterStoreAddress } from './redis/redis-connection.js';
import { SETTINGS, isSettingName, type SettingName, type SettingSpec, type SettingValue } from './settings.js';

/** Reading one environment variable: the typed accessors the server's and the sidecar's config share, and their error. */

export class ConfigError extends Error {
  constructor(readonly variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

export type Env = Record<string, string | undefined>;

export interface ListenAddress {
  /** undefined = every interface */
  host: string | undefined;
  port: number;
}

/** Typed accessors over an environment; shared with the sidecar's config. */
export class Reader {
  constructor(private readonly env: Env) {}

  /** A variable declared in src/settings.ts, read with its declared default and bounds. */
  setting<N extends SettingName>(name: N): SettingValue<N> {
    const spec: SettingSpec = SETTINGS[name];
    switch (spec.kind) {
      case 'int':
        return this.int(name, spec.default, spec.min, spec.max) as SettingValue<N>;
      case 'string':
        return this.string(name, spec.default) as SettingValue<N>;
      case 'bool':
        return this.bool(name, spec.default) as SettingValue<N>;
      case 'oneOf':
        return this.oneOf(name, spec.choices, spec.default) as SettingValue<N>;
      case 'list':
        return this.list(name, [...spec.default]) as SettingValue<N>;
      case 'listen':
        return this.listen(name, spec.default) as SettingValue<N>;
      default:
        throw new Error(`${name} is read by code of its own, not by Reader.setting`);
    }
  }

  optional(name: string): string | undefined {
    // Every RL_* variable is declared once, in src/settings.ts: reading another is a programming error.
    if (name.startsWith('RL_') && !isSettingName(name)) throw new Error(`${name} is not declared in src/settings.ts`);
    const value = this.env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  }

  string(name: string, fallback: string): string {
    return this.optional(name) ?? fallback;
  }

  bool(name: string, fallback: boolean): boolean {
    const value = this.optional(name);
    if (value === undefined) return fallback;
    if (/^(true|1|yes|on)$/i.test(value)) return true;
    if (/^(false|0|no|off)$/i.test(value)) return false;
    throw new ConfigError(name, `must be true or false, got "${value}"`);
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const value = this.optional(name);
    if (value === undefined) return fallback;
    if (!/^\d+$/.test(value)) throw new ConfigError(name, `must be a whole number, got "${value}"`);
    const n = Number(value);
    if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
    return n;
  }

  oneOf<T extends string>(name: string, choices: readonly T[], fallback: T): T {
    const value = this.optional(name);
    if (value === undefined) return fallback;
    if (!(choices as readonly string[]).includes(value)) {
      throw new ConfigError(name, `must be one of ${choices.join(', ')}, got "${value}"`);
    }
    return value as T;
  }

  list(name: string, fallback: string[] = []): string[] {
    const value = this.optional(name);
    if (value === undefined) return fallback;
    return value.split(',').map((s) => s.trim()).filter((s) => s !== '');
  }

  /** `[host]:port`: `:8080` binds every interface, `127.0.0.1:8080` one, `[::1]:8080` IPv6; port 0 = any free port. */
  listen(name: string, fallback: string): ListenAddress {
    const text = this.string(name, fallback);
    const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(text);
    if (!m) throw new ConfigError(name, `must be [host]:port such as ":8080" or "127.0.0.1:8080", got "${text}"`);
    const port = Number(m[3]);
    if (port > 65535) throw new ConfigError(name, `port must be 0-65535, got ${port}`);
    const host = m[1] ?? (m[2] === '' ? undefined : m[2]);
    return { host, port };
  }

  /** RL_COUNTERSTORE_ADDR (or another store address), checked now so that a bad address stops start-up like any other bad value. */
  counterStoreAddr(name = 'RL_COUNTERSTORE_ADDR'): string | undefined {
    const value = this.optional(name);
    if (value === undefined) return undefined;
    try {
      parseCounterStoreAddress(value, name);
    } catch (error) {
      if (error instanceof CounterStoreAddressError) throw new ConfigError(name, error.problem);
      throw error;
    }
    return value;
  }

  httpUrl(name: string, text: string): string {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw new ConfigError(name, `"${text}" is not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new ConfigError(name, `"${text}" must be an http:// or https:// URL`);
    }
    return text.replace(/\/+$/, '');
  }
}
