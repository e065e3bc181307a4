import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';
import { SCRIPT_PROTOCOLS } from './counter-script-protocols.js';
import type { ScriptName } from './script-names.js';
import { protocolProblems, type Operations, type ProtocolDeclaration, type ReplyFields } from './script-protocol.js';

/**
 * The one loader of every Lua script the service sends to Redis: the counter store's (`lua/*.lua`,
 * one per algorithm plus the two lease operations) and the policy store's (`lua/policy/*.lua`). Each
 * script opens with a header comment naming its KEYS, ARGV and reply (test/redis/lua-scripts.test.ts
 * holds every one to it), and its shared helpers (`lua/includes/*.lua`) are expanded here.
 *
 * Include directive: a line consisting of `-- @include "<name>"` is replaced by the text of
 * `lua/includes/<name>.lua` (which may include others). Each include is expanded once per script;
 * later occurrences of the same name become a comment, and a cycle or a missing file is an error.
 *
 * Two ways to run them, both EVALSHA with the script sent in full after NOSCRIPT. A caller that simply
 * calls a script defines it as a command of its client (`defineScripts`, ioredis defineCommand, as
 * bullmq loads its scripts). A caller whose script must go out in a pipeline of its own making (the
 * counter store's batches, the policy commit followed by WAIT) sends EVALSHA itself and, on NOSCRIPT
 * (`isNoScript`), the text: ioredis would resend it outside the pipeline.
 *
 * The batch script (`lua/batch.lua`, built by `readBatchScript`) runs several operations in one call:
 * it is assembled from these same scripts, each wrapped as a Lua function, so every algorithm keeps
 * exactly one source. It is sent without comments and blank lines (`stripLuaComments`): Redis gets
 * it in full after every NOSCRIPT, and the comments are most of its size.
 */

export type { ScriptName };

export interface LuaScript {
  /** Its path below `lua/`, without `.lua`: `fixed_window`, `policy/commit`. */
  name: string;
  /** The script with every include expanded: what Redis runs. */
  lua: string;
  /** How many of the arguments are KEYS. */
  numberOfKeys: number;
  /** SHA1 of `lua`, the EVALSHA digest. */
  sha1: string;
}

/** Key count of each script; keys.ts builds exactly this many keys for the algorithm. */
export const SCRIPT_KEY_COUNTS: Readonly<Record<ScriptName, number>> = {
  fixed_window: 1,
  sliding_window_log: 2,
  sliding_window_counter: 1,
  token_bucket: 1,
  leaky_bucket: 1,
  quota: 1,
  concurrency_acquire: 1,
  concurrency_release: 1,
  region_pool: 1,
};

export const SCRIPT_NAMES = Object.keys(SCRIPT_KEY_COUNTS) as ScriptName[];

/** The policy store's scripts (`lua/policy/<name>.lua`); each takes the store's hashes as KEYS. */
export const POLICY_SCRIPT_NAMES = ['commit', 'seed', 'read_one', 'snapshot'] as const;
export type PolicyScriptName = (typeof POLICY_SCRIPT_NAMES)[number];

/**
 * `lua/` at the repository root. The same relative URL works from `src/redis/` (tsx) and from
 * `dist/redis/` (compiled), both two levels below the root.
 */
export const LUA_DIR: URL = new URL('../../lua/', import.meta.url);

const INCLUDE_LINE = /^[ \t]*--[ \t]*@include[ \t]+"([^"]*)"[ \t]*$/;
const INCLUDE_NAME = /^[A-Za-z0-9_-]+$/;

/**
 * Expands `-- @include "name"` lines in `source`. `readInclude(name)` returns the text of one include;
 * `origin` names the source in error messages.
 */
export function expandIncludes(source: string, readInclude: (name: string) => string, origin = 'script'): string {
  const done = new Set<string>();
  const expand = (text: string, from: string, stack: string[]): string => {
    const out: string[] = [];
    for (const line of text.split('\n')) {
      const match = INCLUDE_LINE.exec(line.replace(/\r$/, ''));
      if (!match) {
        out.push(line);
        continue;
      }
      const name = match[1];
      if (!INCLUDE_NAME.test(name)) {
        throw new Error(`${from}: bad include name ${JSON.stringify(name)} (letters, digits, _ and - only)`);
      }
      if (stack.includes(name)) {
        throw new Error(`${from}: include cycle ${[...stack, name].join(' -> ')}`);
      }
      if (done.has(name)) {
        out.push(`-- (include "${name}" already expanded above)`);
        continue;
      }
      let body: string;
      try {
        body = readInclude(name);
      } catch (err) {
        throw new Error(`${from}: cannot read include "${name}": ${(err as Error).message}`);
      }
      const expanded = expand(body.replace(/\n+$/, ''), `include "${name}"`, [...stack, name]);
      done.add(name);
      out.push(`-- >>> include "${name}"`, expanded, `-- <<< include "${name}"`);
    }
    return out.join('\n');
  };
  return expand(source, origin, []);
}

/**
 * Reads `<dir>/<name>.lua` (default `lua/`) and expands its includes. Given the script's `protocol`
 * (script-protocol.ts), throws if the header does not list its names in its order.
 */
export function readLuaScript(name: string, numberOfKeys: number, dir: URL = LUA_DIR, protocol?: ProtocolDeclaration<Operations, ReplyFields>): LuaScript {
  const file = new URL(`${name}.lua`, dir);
  const source = readFileSync(file, 'utf8');
  const problems = protocol ? protocolProblems(protocol, source) : [];
  if (problems.length > 0) throw new Error(`${fileURLToPath(file)}: header differs from its protocol: ${problems.join('; ')}`);
  const lua = expandIncludes(
    source,
    (include) => readFileSync(new URL(`includes/${include}.lua`, dir), 'utf8'),
    fileURLToPath(file),
  );
  return { name, lua, numberOfKeys, sha1: createHash('sha1').update(lua).digest('hex') };
}

/**
 * The batch operation that runs `name` with the counter's take ledger (keys.ts takesKey) as one key
 * more: a named take or a reclaim (lua/includes/lease.lua). Every script that includes "lease" has one.
 */
export function withTakeLedger(name: ScriptName): string {
  return `${name}+ledger`;
}

/**
 * The batch operation that runs `name` with the take ledger and then the counter's share ledger
 * (keys.ts sharesKey) as two keys more: a region's take, give or reclaim of a global budget with shares
 * (lua/includes/shares.lua, included by "lease").
 */
export function withShareLedger(name: ScriptName): string {
  return `${name}+shares`;
}

/** Whether a script keeps a take ledger (includes "lease"): its named takes and reclaims take one key more. */
export function keepsTakeLedger(script: LuaScript): boolean {
  return script.lua.includes('-- >>> include "lease"');
}

/** One counter operation's script; a counter script's header is checked against its protocol (counter-script-protocols.ts). */
export function readScript(name: ScriptName, dir: URL = LUA_DIR): LuaScript {
  return readLuaScript(name, SCRIPT_KEY_COUNTS[name], dir, SCRIPT_PROTOCOLS[name]);
}

/** The policy store's scripts, each taking `numberOfKeys` KEYS (the store's hashes). */
export function readPolicyScripts(
  numberOfKeys: number,
  dir: URL = LUA_DIR,
  protocols: Partial<Record<PolicyScriptName, ProtocolDeclaration<Operations, ReplyFields>>> = {},
): Readonly<Record<PolicyScriptName, LuaScript>> {
  const all = {} as Record<PolicyScriptName, LuaScript>;
  for (const name of POLICY_SCRIPT_NAMES) all[name] = readLuaScript(`policy/${name}`, numberOfKeys, dir, protocols[name]);
  return all;
}

/**
 * Defines each script as the command `commands` names for it on `client`: ioredis sends EVALSHA, and
 * the script in full the first time on a connection and after NOSCRIPT.
 */
export function defineScripts<N extends string>(client: Redis | Cluster, scripts: Readonly<Record<N, LuaScript>>, commands: Readonly<Record<N, string>>): void {
  for (const name of Object.keys(commands) as N[]) client.defineCommand(commands[name], { numberOfKeys: scripts[name].numberOfKeys, lua: scripts[name].lua });
}

/** Redis's answer to an EVALSHA of a script it does not hold (a SCRIPT FLUSH, a restart, a failover): nothing ran. */
export function isNoScript(error: unknown): boolean {
  return /^NOSCRIPT/.test((error as Error | undefined)?.message ?? '');
}

/** The batch script: what Redis runs for a batch of operations, and its EVALSHA digest. */
export interface BatchScript {
  lua: string;
  sha1: string;
}

/** The line of lua/batch.lua that becomes the operation functions and the OPERATIONS table. */
const OPERATIONS_LINE = /^[ \t]*--[ \t]*@operations[ \t]*$/m;

/**
 * Builds the batch script from `lua/batch.lua` (the driver) and every operation script in `dir`: each
 * expanded script becomes the body of `local function op_<name>(KEYS, ARGV)`, so its KEYS and ARGV are
 * the operation's own slices and its `return` ends only that operation. The includes are expanded per
 * operation, as in the script alone (`now`, `fmt`, `reply`... are each function's own locals).
 */
export function readBatchScript(dir: URL = LUA_DIR): BatchScript {
  const file = new URL('batch.lua', dir);
  const driver = readFileSync(file, 'utf8');
  const markers = driver.match(new RegExp(OPERATIONS_LINE.source, 'gm'))?.length ?? 0;
  if (markers !== 1) throw new Error(`${fileURLToPath(file)}: expected one "-- @operations" line, found ${markers}`);
  const ledgerScripts: ScriptName[] = [];
  const functions = SCRIPT_NAMES.map((name) => {
    const script = readScript(name, dir);
    if (keepsTakeLedger(script)) ledgerScripts.push(name);
    return `-- >>> operation "${name}" (lua/${name}.lua)\nlocal function op_${name}(KEYS, ARGV)\n${script.lua.replace(/\n+$/, '')}\nend\n-- <<< operation "${name}"`;
  });
  const table = SCRIPT_NAMES.map((name) => `  ${name} = { run = op_${name}, key_count = ${SCRIPT_KEY_COUNTS[name]} },`);
  for (const name of ledgerScripts) table.push(`  ['${withTakeLedger(name)}'] = { run = op_${name}, key_count = ${SCRIPT_KEY_COUNTS[name] + 1} },`);
  for (const name of ledgerScripts) table.push(`  ['${withShareLedger(name)}'] = { run = op_${name}, key_count = ${SCRIPT_KEY_COUNTS[name] + 2} },`);
  const operations = [...functions, 'local OPERATIONS = {', ...table, '}'].join('\n');
  // A replacer function: the scripts contain `$` patterns that a replacement string would interpret.
  const lua = stripLuaComments(driver.replace(OPERATIONS_LINE, () => operations));
  return { lua, sha1: createHash('sha1').update(lua).digest('hex') };
}

/**
 * `source` without its comments, blank lines and the spaces around line breaks: the same Lua program
 * in fewer bytes. A small Lua lexer, so `--` inside a string ('...', "..." with their escapes, or a
 * long string `[[...]]`, `[==[...]==]`) stays, and long strings are copied byte for byte. A long
 * comment (`--[[...]]`) becomes one space, as it separates tokens in Lua; a line comment ends at the
 * line break, which stays. Line breaks are kept (one per non-blank line), so no two statements
 * merge. Throws on an unterminated string or long comment.
 */
export function stripLuaComments(source: string): string {
  let out = '';
  /** Spaces and tabs seen in code since the last token: written only if a token follows on the line. */
  let space = '';
  let lineStart = true;
  let i = 0;
  const emit = (text: string) => {
    if (!lineStart) out += space;
    space = '';
    lineStart = false;
    out += text;
  };
  while (i < source.length) {
    const c = source[i];
    if (c === '\n') {
      if (!lineStart) out += '\n'; // a blank (or comment-only) line adds nothing
      space = '';
      lineStart = true;
      i++;
    } else if (c === ' ' || c === '\t' || c === '\r') {
      space += c === '\r' ? ' ' : c; // a CR separates tokens; at a CRLF line end it goes with the line's trailing space
      i++;
    } else if (c === '-' && source[i + 1] === '-') {
      const level = longBracketLevel(source, i + 2);
      if (level >= 0) {
        i = longBracketEnd(source, i + 2, level, 'long comment');
        space += ' ';
      } else {
        const eol = source.indexOf('\n', i);
        i = eol < 0 ? source.length : eol;
      }
    } else if (c === '"' || c === "'") {
      const end = quotedStringEnd(source, i);
      emit(source.slice(i, end));
      i = end;
    } else if (c === '[' && longBracketLevel(source, i) >= 0) {
      const end = longBracketEnd(source, i, longBracketLevel(source, i), 'long string');
      emit(source.slice(i, end));
      i = end;
    } else {
      emit(c);
      i++;
    }
  }
  return lineStart ? out : `${out}\n`;
}

/** The level of the long bracket opening at `at` (`[[` 0, `[=[` 1, ...), or -1 when there is none. */
function longBracketLevel(source: string, at: number): number {
  if (source[at] !== '[') return -1;
  let level = 0;
  while (source[at + 1 + level] === '=') level++;
  return source[at + 1 + level] === '[' ? level : -1;
}

/** The index after the long bracket of `level` that opens at `at` closes. */
function longBracketEnd(source: string, at: number, level: number, what: string): number {
  const close = `]${'='.repeat(level)}]`;
  const end = source.indexOf(close, at + level + 2);
  if (end < 0) throw new Error(`unterminated ${what} at offset ${at}`);
  return end + close.length;
}

/** The index after the quoted string that opens at `at` (a backslash escapes the next character). */
function quotedStringEnd(source: string, at: number): number {
  const quote = source[at];
  for (let i = at + 1; i < source.length; i++) {
    const c = source[i];
    if (c === '\\') i++;
    else if (c === quote) return i + 1;
    else if (c === '\n') break; // only an escaped line break may continue a quoted string
  }
  throw new Error(`unterminated string at offset ${at}`);
}

let batchCache: BatchScript | undefined;

/** The batch script, built once per process. */
export function loadBatchScript(): BatchScript {
  batchCache ??= readBatchScript();
  return batchCache;
}

let cache: Readonly<Record<ScriptName, LuaScript>> | undefined;

/**
 * Every operation script alone, read once per process (the files are part of the installed package).
 * The store runs them through the batch script; alone they serve tests and `redis-cli --eval`.
 */
export function loadScripts(): Readonly<Record<ScriptName, LuaScript>> {
  if (!cache) {
    const all = {} as Record<ScriptName, LuaScript>;
    for (const name of SCRIPT_NAMES) all[name] = readScript(name);
    cache = Object.freeze(all);
  }
  return cache;
}
