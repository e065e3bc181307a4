import type { RequestContext, ScopeField } from './request-context.js';

/**
 * `ctx[field]` for a field name known only at run time, as one plain property read per case. One
 * `ctx[field]` read that sees several names falls to V8's generic lookup through the object's
 * properties (BENCHMARKS.md, "Fifth round"); matching reads a policy's scope fields this way for every
 * candidate. Every scope field has its case: a field added to the request without one does not compile.
 */
export function scopeFieldOf(ctx: RequestContext, field: ScopeField): string | undefined {
  switch (field) {
    case 'org_id':
      return ctx.org_id;
    case 'tenant_id':
      return ctx.tenant_id;
    case 'application':
      return ctx.application;
    case 'service':
      return ctx.service;
    case 'environment':
      return ctx.environment;
    case 'signal_type':
      return ctx.signal_type;
    case 'operation':
      return ctx.operation;
    case 'endpoint':
      return ctx.endpoint;
    case 'method':
      return ctx.method;
    case 'user_id':
      return ctx.user_id;
    case 'api_key':
      return ctx.api_key;
    case 'client_id':
      return ctx.client_id;
    case 'source_ip':
      return ctx.source_ip;
    case 'region':
      return ctx.region;
    case 'resource':
      return ctx.resource;
    case 'severity':
      return ctx.severity;
    case 'span_name':
      return ctx.span_name;
    case 'topic':
      return ctx.topic;
    case 'consumer_group':
      return ctx.consumer_group;
    case 'job_type':
      return ctx.job_type;
    default:
      return byName(ctx, field);
  }
}

/** `field: never`: only a name without its case above reaches here, and then the build fails. */
function byName(ctx: RequestContext, field: never): string | undefined {
  return (ctx as unknown as Record<string, string | undefined>)[field];
}
