import { lengthPrefixed, shortDigest } from '../counters/keys.js';
import { clientNetwork } from '../matching/client-network.js';
import { canonicalMethod } from '../model/http-method.js';
import { CONTEXT_STRING_FIELDS, type RequestContext } from '../model/request-context.js';

/**
 * A source_ip as one address, whatever its spelling (`2001:DB8::1` = `2001:db8:0:0::1`, `::ffff:10.0.0.1`
 * = `10.0.0.1`), as counters see it; never its network: two hosts of one network hold two slots.
 */
const ADDRESS = clientNetwork({ v4: 32, v6: 128 });

/**
 * A concurrency slot is named by `request_id` when the caller gives one; otherwise by a digest of every
 * identifying field, so an acquire and its release that carry the same fields find the same slot
 * (an address and an HTTP method name in any spelling, as matching sees them: the id is taken before
 * the matcher upper-cases the method).
 */
export function slotIdOf(ctx: RequestContext): string {
  if (ctx.request_id !== undefined && ctx.request_id !== '') return ctx.request_id;
  const parts: string[] = [];
  for (const field of CONTEXT_STRING_FIELDS) {
    const value = ctx[field];
    if (value !== undefined) parts.push(field, field === 'source_ip' ? ADDRESS.identityOf(value) : field === 'method' ? canonicalMethod(value) : value);
  }
  for (const key of Object.keys(ctx.tags).sort()) parts.push(`tags.${key}`, ctx.tags[key]);
  return shortDigest(lengthPrefixed(parts));
}

/**
 * The name a counter holds a slot under: its slot id, qualified by the request's `org_id` when the id is
 * the caller's `request_id` (a digest already covers `org_id`). Request ids are chosen by callers, so
 * without it one organisation could release another's slot on a policy they share (a global one).
 */
export function slotHolderOf(ctx: RequestContext, slotId: string): string {
  return ctx.org_id !== undefined && slotId === ctx.request_id ? lengthPrefixed(['org_id', ctx.org_id, 'request_id', slotId]) : slotId;
}
