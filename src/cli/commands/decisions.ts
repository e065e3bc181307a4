import { Option, type Command } from 'commander';
import { CONTEXT_STRING_FIELDS, createClient, type Decision, type Operation, type RequestContext } from '@rl/client';
import { resolveConnection, type GlobalOptions } from '../connection.js';
import { invalidInput } from '../exit-codes.js';
import { printJson, printLines } from '../output.js';

/**
 * `rl check|acquire|release|refund` with the RequestContext as `--field value` pairs
 * (`--org_id acme --user_id carol --quantity 2 --tag env=prod`; `--org-id` is the same field), through the SDK's client with
 * `failMode: 'throw'` (a tool must say the service is down, not pretend it allowed) and no deny cache
 * (every call asks the server).
 */

export type ContextOptions = Record<string, unknown> & { quantity?: string; tag?: string[]; peek?: boolean; data?: string };

const OPERATIONS: { name: Operation; description: string }[] = [
  { name: 'check', description: 'count a request against the best matching rate or quota policy' },
  { name: 'acquire', description: 'take a concurrency lease (lease id: --request_id, else a digest of the fields)' },
  { name: 'release', description: 'give back a lease taken by acquire with the same fields' },
  { name: 'refund', description: 'give back --quantity units the same context consumed and did not use' },
];

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/**
 * The option of one request field, under both spellings (`--api_key, --api-key`): no flag of `rl` may
 * mean one thing with `_` and another with `-`.
 */
export function fieldOption(field: string): Option {
  const dashed = field.replaceAll('_', '-');
  return new Option(dashed === field ? `--${field} <value>` : `--${field}, --${dashed} <value>`, `the request field ${field}`);
}

/** Each request field's option, with the name commander stores its value under. */
const FIELD_OPTIONS = CONTEXT_STRING_FIELDS.map((field) => ({ field, option: fieldOption(field) }));

export function registerDecisionCommands(program: Command): void {
  for (const op of OPERATIONS) {
    const cmd = program.command(op.name).description(op.description);
    addContextOptions(cmd, op.name === 'refund' ? 'units to give back (required)' : 'units this request costs (default 1)');
    if (op.name === 'check') cmd.option('--peek', 'evaluate without consuming anything (quantity 0)');
    cmd.action(async (o: ContextOptions, c: Command) => {
      const g = c.optsWithGlobals<GlobalOptions>();
      const context = contextFrom(o, op.name);
      const connection = resolveConnection(g);
      // logger: false: the ignored fields are printed with the decision (renderDecision), not warned on stderr too.
      const client = createClient({ ...connection, failMode: 'throw', denyCache: false, logger: false });
      let decision: Decision;
      try {
        decision = await client[op.name](context);
      } finally {
        await client.close();
      }
      if (g.json) return printJson(decision);
      printLines(renderDecision(decision));
    });
  }
}

/** The flags of a RequestContext (every field, `--quantity`, `--tag`, `-d`), for every command that sends one. */
export function addContextOptions(cmd: Command, quantity: string): Command {
  for (const { option } of FIELD_OPTIONS) cmd.addOption(option);
  return cmd
    .option('--quantity <n>', quantity)
    .option('--tag <key=value>', 'a tag of the request (repeatable)', collect, [])
    .option('-d, --data <json>', 'the whole RequestContext as JSON (flags given too are added to it)');
}

/** The RequestContext from `-d` and the flags (flags win); quantity and tags checked here, the rest by the server. */
export function contextFrom(o: ContextOptions, operation: Operation): RequestContext {
  const context: Record<string, unknown> = {};
  if (o.data !== undefined) {
    let data: unknown;
    try {
      data = JSON.parse(o.data);
    } catch (error) {
      throw invalidInput(`--data: not JSON: ${(error as Error).message}`);
    }
    if (typeof data !== 'object' || data === null || Array.isArray(data)) throw invalidInput('--data: must be a JSON object (a RequestContext)');
    Object.assign(context, data);
  }
  for (const { field, option } of FIELD_OPTIONS) {
    const value = o[option.attributeName()];
    if (typeof value === 'string') context[field] = value;
  }
  if (o.quantity !== undefined) {
    if (!/^[0-9]{1,16}$/.test(o.quantity) || !Number.isSafeInteger(Number(o.quantity))) throw invalidInput(`--quantity: must be a whole number, got ${JSON.stringify(o.quantity)}`);
    context.quantity = Number(o.quantity);
  }
  if (o.peek) {
    if (o.quantity !== undefined && Number(o.quantity) !== 0) throw invalidInput('--peek: a peek consumes nothing; drop --quantity');
    context.quantity = 0;
  }
  if (operation === 'refund' && context.quantity === undefined) throw invalidInput('--quantity: required for refund (the units to give back)');
  if ((o.tag ?? []).length > 0) {
    const tags: Record<string, string> = { ...((context.tags as Record<string, string>) ?? {}) };
    for (const pair of o.tag!) {
      const eq = pair.indexOf('=');
      if (eq <= 0) throw invalidInput(`--tag: must be key=value, got ${JSON.stringify(pair)}`);
      tags[pair.slice(0, eq)] = pair.slice(eq + 1);
    }
    context.tags = tags;
  }
  return context as RequestContext;
}

/** `ALLOWED  allow  within_limit` then the numbers that matter, in people's units. */
function renderDecision(d: Decision): string[] {
  const lines = [`${d.allowed ? 'ALLOWED' : 'REFUSED'}  action=${d.action}  reason=${d.reason}${d.shadow_mode ? '  (shadow mode)' : ''}`];
  lines.push(`policy       ${d.matched_policy_id === '' ? '(none)' : d.matched_policy_id}`);
  if (d.matched_policy_id !== '') {
    lines.push(`remaining    ${d.remaining} of ${d.limit}${d.window > 0 ? ` per ${ms(d.window)}` : ''}`);
    lines.push(`reset_after  ${ms(d.reset_after)}`);
  }
  if (d.retry_after > 0) lines.push(`retry_after  ${ms(d.retry_after)}`);
  const { ignored_fields: ignored, ...metadata } = d.metadata ?? {};
  for (const [k, v] of Object.entries(metadata)) lines.push(`metadata     ${k}=${v}`);
  // A misspelt field matches no policy: say so where it cannot be missed.
  if (ignored !== undefined) lines.push(`ignored      ${ignored.split(',').join(', ')}  (not request fields: the server ignored them; misspelt?)`);
  return lines;
}

function ms(value: number): string {
  if (value < 1000) return `${value}ms`;
  const s = value / 1000;
  return s < 120 ? `${Number(s.toFixed(3))}s` : `${Number((s / 60).toFixed(1))}m`;
}
