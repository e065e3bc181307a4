/**
 * A Lua script's protocol, declared once: each operation's named arguments in ARGV order (the last of
 * them, `optionalArgs`, sent only when they apply), and the named fields of its reply array in order. From the one declaration come the ARGV a call sends (`argv`), the
 * reply read back into a named object (`parse`), the reply an in-memory port of the script builds
 * (`encodeReply`), and the check that the script's header lists the same names in the same order
 * (`protocolProblems`, run by the loader when it is given the protocol, and by the tests).
 *
 * Names are camelCase here and snake_case in the Lua header (`retryAfterMs` is `retry_after_ms`).
 * The header forms checked:
 *   - an operation of a script that takes its operation as an argument: a comment line
 *     `--   <operation>  <arg> <arg> ...` (a remark may follow the names, in parentheses);
 *   - a script of one operation (`operation: false`): its `-- ARGV[i]  <arg> ...` lines, whose first
 *     words end with the declared arguments (the arguments before them, such as `now`, are the caller's);
 *   - the reply: `-- Returns  {<field>, <field> 1/0, ...[, <optional field>]}`.
 *
 * Hot path (a region decision sends and reads one of these): `argv` fills one array, `parse` one object
 * whose fields are always written in the same order, so every reply of a protocol has the same shape.
 */

export type { FieldKind, ParsedReply, ReplyFields, WireReply } from '../util/reply-fields.js';
import type { FieldKind, ParsedReply, ReplyFields, WireReply } from '../util/reply-fields.js';

/** An argument: a number as its decimal string, a flag as '1'/'0', null as '' (none), a string as it is. */
export type ArgValue = string | number | boolean | null;
export type Operations = Readonly<Record<string, readonly string[]>>;
/** An operation's named arguments: the optional ones (`P`) may be left out (undefined), which leaves them out of ARGV. */
export type ArgsOf<Names extends readonly string[], P extends string = never> = { readonly [N in Exclude<Names[number], P>]: ArgValue } & {
  readonly [N in Extract<Names[number], P>]?: ArgValue;
};

export interface ProtocolDeclaration<O extends Operations, F extends ReplyFields, P extends string = string> {
  /** The script's path below `lua/`, without `.lua` (as the loader names it). */
  script: string;
  /** Each operation's arguments, in ARGV order. */
  operations: O;
  /**
   * Arguments sent only when they apply (the script reads them when ARGV has them): each operation that
   * has them has them last. `argv` ends at the first one left out; one after it given is an error.
   */
  optionalArgs?: readonly P[];
  /** true: the operation's name is sent first, before its arguments (the script switches on it). */
  operationArg: boolean;
  /** The reply array's fields, in order. */
  reply: F;
  /** How many of the last reply fields (ids only) the script may leave out. */
  optionalFields?: number;
}

export interface ScriptProtocol<O extends Operations, F extends ReplyFields, P extends string = never> extends ProtocolDeclaration<O, F, P> {
  /** The ARGV of `operation` (its name first, if the script takes it), from the named arguments; optional ones left out end it. */
  argv<N extends keyof O & string>(operation: N, args: ArgsOf<O[N], P>): string[];
  /** The script's reply array as a named object; throws on a reply of another shape. */
  parse(reply: unknown): ParsedReply<F>;
  /** The reply array the script would return for these fields (its in-memory ports build theirs here). */
  encodeReply(fields: WireReply<F>): unknown[];
}

function encodeArg(value: ArgValue): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return String(value);
  if (typeof value === 'boolean') return value ? '1' : '0';
  return '';
}

/** `retryAfterMs` -> `retry_after_ms`: a name as the Lua header spells it. */
export function luaName(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/**
 * Per operation, the index of its first optional argument (its argument count when it has none); throws
 * when an optional argument is followed by one that is not.
 */
function optionalStarts(script: string, operations: Operations, optional: readonly string[]): Record<string, number> {
  const starts: Record<string, number> = {};
  for (const [operation, args] of Object.entries(operations)) {
    const first = args.findIndex((name) => optional.includes(name));
    starts[operation] = first < 0 ? args.length : first;
    const required = args.slice(starts[operation]).find((name) => !optional.includes(name));
    if (required !== undefined) throw new Error(`${script} ${operation}: optional arguments must come last, but ${required} follows them`);
  }
  return starts;
}

export function defineProtocol<const O extends Operations, const F extends ReplyFields, const P extends string = never>(
  declaration: ProtocolDeclaration<O, F, P>,
): ScriptProtocol<O, F, P> {
  const optionalFrom = optionalStarts(declaration.script, declaration.operations, declaration.optionalArgs ?? []);
  const names = Object.keys(declaration.reply);
  const kinds = names.map((name) => declaration.reply[name]);
  const optional = declaration.optionalFields ?? 0;
  if (kinds.slice(names.length - optional).some((kind) => kind !== 'id')) throw new Error(`${declaration.script}: only id fields may be optional`);
  const min = names.length - optional;
  const { script, operationArg } = declaration;
  const read = (kind: FieldKind, value: unknown): unknown => {
    if (kind === 'id') return typeof value === 'string' ? value : undefined;
    if (kind === 'pairs') return readPairs(value, script);
    if (kind === 'tag' && (value === '' || value == null)) return null;
    const n = Number(value);
    if (!Number.isFinite(n)) throw new Error(`unexpected number ${JSON.stringify(value)} in ${script} reply`);
    return kind === 'flag' ? n === 1 : n;
  };
  return {
    ...declaration,
    argv(operation, args) {
      const list = declaration.operations[operation];
      const values = args as Record<string, ArgValue | undefined>;
      // The optional arguments given: up to the first left out, and none after it.
      let count = optionalFrom[operation];
      while (count < list.length && values[list[count]] !== undefined) count++;
      for (let j = count + 1; j < list.length; j++) {
        if (values[list[j]] !== undefined) throw new Error(`${script} ${operation}: ${list[j]} given without ${list[count]}`);
      }
      const out = new Array<string>(count + (operationArg ? 1 : 0));
      let i = 0;
      if (operationArg) out[i++] = operation;
      for (let j = 0; j < count; j++) out[i++] = encodeArg(values[list[j]] as ArgValue);
      return out;
    },
    parse(reply) {
      if (!Array.isArray(reply) || reply.length < min || reply.length > names.length) throw new Error(`unexpected ${script} reply ${JSON.stringify(reply)}`);
      const out: Record<string, unknown> = {};
      for (let i = 0; i < names.length; i++) out[names[i]] = read(kinds[i], reply[i]);
      return out as ParsedReply<F>;
    },
    encodeReply(fields) {
      const out: unknown[] = [];
      for (let i = 0; i < names.length; i++) {
        const value = (fields as Record<string, unknown>)[names[i]];
        if (kinds[i] === 'flag') out.push(value ? 1 : 0);
        else if (kinds[i] !== 'id' || value !== undefined) out.push(value);
        else if (i < min) out.push(0);
        else break; // an optional id left out, and the optional ones after it
      }
      return out;
    },
  };
}

/** A flat list field, value, field, value... as a Map; throws on anything else (a field without its value, a non-string). */
function readPairs(value: unknown, script: string): Map<string, string> {
  if (!Array.isArray(value) || value.length % 2 !== 0 || value.some((item) => typeof item !== 'string')) {
    throw new Error(`unexpected field/value list ${JSON.stringify(value)} in ${script} reply`);
  }
  const map = new Map<string, string>();
  for (let i = 0; i < value.length; i += 2) map.set(value[i] as string, value[i + 1] as string);
  return map;
}

/** The comment lines that open `source` (its header). */
function headerLines(source: string): string[] {
  const lines: string[] = [];
  for (const line of source.split('\n')) {
    if (!line.startsWith('--')) break;
    lines.push(line.replace(/\r$/, ''));
  }
  return lines;
}

const NAME = /^[a-z_][a-z0-9_]*$/;

/** The leading names of `words`, up to the first word that is not one (a remark). */
function leadingNames(words: string[]): string[] {
  const out: string[] = [];
  for (const word of words) {
    if (!NAME.test(word)) break;
    out.push(word);
  }
  return out;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The field names of the header's `Returns  {...}`, which may run over several comment lines. */
function replyNames(header: string[]): string[] | undefined {
  const text = header.map((line) => line.replace(/^--\s?/, '')).join(' ');
  const match = /Returns\s+\{([^}]*)\}/.exec(text);
  if (!match) return undefined;
  return match[1].split(',').map((part) => part.replace(/[[\]]/g, '').trim().split(/\s+/)[0]).filter((name) => name !== '');
}

/** How the script's header (`source`, as in the file) differs from `protocol`; [] when it lists the same names in the same order. */
export function protocolProblems(protocol: ProtocolDeclaration<Operations, ReplyFields>, source: string): string[] {
  const header = headerLines(source);
  const problems: string[] = [];
  const words = header.map((line) => line.replace(/^--/, '').trim().split(/\s+/));
  for (const [operation, args] of Object.entries(protocol.operations)) {
    const expected = args.map(luaName);
    if (protocol.operationArg) {
      const lines = words.filter((w) => w[0] === operation).map((w) => leadingNames(w.slice(1)));
      if (!lines.some((found) => sameList(found, expected))) {
        problems.push(`operation ${operation}: no header line "--   ${[operation, ...expected].join(' ')}" (found: ${lines.map((l) => l.join(' ')).join(' | ') || 'none'})`);
      }
    } else {
      const found = words.filter((w) => /^ARGV\[\d+\]$/.test(w[0])).map((w) => (w[1] ?? '').replace(/[^a-z0-9_].*$/, ''));
      if (!sameList(found.slice(found.length - expected.length), expected)) problems.push(`ARGV lines name ${found.join(' ')}, not ending with ${expected.join(' ')}`);
    }
  }
  const found = replyNames(header);
  const expected = Object.keys(protocol.reply).map(luaName);
  if (!found) problems.push('no "Returns  {...}" in the header');
  else if (!sameList(found, expected)) problems.push(`reply fields {${found.join(', ')}}, declared {${expected.join(', ')}}`);
  return problems;
}
