import Router from '@koa/router';
import type Koa from 'koa';
import type { DeleteResult, PolicyService } from '../../policy-service/policy-service.js';
import { httpTraceCarrier, type Tracing } from '../../observability/tracing.js';
import type { Policy } from '../../policy/types.js';
import { callerOf } from '../auth-guard.js';
import { bodyOf } from '../body.js';

/**
 * Policy management under /rl/v1 (docs/reference.md "Statuses"): thin adapters around
 * PolicyService, which raises the typed errors that http/errors.ts maps to statuses.
 *
 * Single-policy responses carry `ETag: "<version>"`, the value `If-Match` takes.
 */
export function policyRoutes(service: PolicyService, tracing?: Tracing): Router {
  const router = new Router({ prefix: '/rl/v1' });
  /** A change, inside its `rl.policy.<action>` span when tracing is on. */
  const traced = (ctx: Koa.Context, action: string, change: () => Promise<Policy>): Promise<Policy> =>
    tracing ? tracing.policyChange(action, httpTraceCarrier(ctx.headers), change, (p) => ({ policyId: p.policy_id, version: p.version })) : change();

  router.get('/policies', (ctx) => {
    ctx.body = service.list(callerOf(ctx));
  });

  router.post('/policies', async (ctx) => {
    const policy = await traced(ctx, 'create', () => service.create(bodyOf(ctx), callerOf(ctx)));
    ctx.set('Location', `/rl/v1/policies/${encodeURIComponent(policy.policy_id)}`);
    sendWritten(ctx, policy, 201);
  });

  // Before /policies/:id so that "validate" is never taken for an id on POST (there is no POST /:id).
  router.post('/policies/validate', (ctx) => {
    ctx.body = service.validate(bodyOf(ctx), callerOf(ctx));
  });

  router.get('/policies/:id', (ctx) => {
    sendPolicy(ctx, service.get(ctx.params.id, callerOf(ctx)));
  });

  router.put('/policies/:id', async (ctx) => {
    sendWritten(ctx, await traced(ctx, 'update', () => service.replace(ctx.params.id, bodyOf(ctx), callerOf(ctx), writeOptions(ctx))));
  });

  router.patch('/policies/:id', async (ctx) => {
    sendWritten(ctx, await traced(ctx, 'patch', () => service.patch(ctx.params.id, bodyOf(ctx), callerOf(ctx), writeOptions(ctx))));
  });

  router.delete('/policies/:id', async (ctx) => {
    const removed = await traced(ctx, 'delete', () => service.remove(ctx.params.id, callerOf(ctx), writeOptions(ctx)));
    ctx.body = { deleted: true, policy_id: removed.policy_id } satisfies DeleteResult;
  });

  router.post('/policies/:id/rollout', async (ctx) => {
    sendPolicy(ctx, await traced(ctx, 'rollout', () => service.rollout(ctx.params.id, bodyOf(ctx), callerOf(ctx), writeOptions(ctx))));
  });

  router.post('/policies/:id/rollback', async (ctx) => {
    sendPolicy(ctx, await traced(ctx, 'rollback', () => service.rollback(ctx.params.id, bodyOf(ctx), callerOf(ctx), writeOptions(ctx))));
  });

  router.get('/policies/:id/versions', async (ctx) => {
    ctx.body = await service.versions(ctx.params.id, callerOf(ctx));
  });

  router.get('/policies/:id/audit', async (ctx) => {
    ctx.body = await service.audit(ctx.params.id, callerOf(ctx));
  });

  /** A create, replace or patch: the policy, with `warnings` when it ties another policy. */
  const sendWritten = (ctx: Koa.Context, policy: Policy, status = 200): void => {
    sendPolicy(ctx, policy, status);
    const warnings = service.warningsFor(policy, callerOf(ctx));
    if (warnings.length > 0) ctx.body = { ...policy, warnings };
  };

  return router;
}

function sendPolicy(ctx: Koa.Context, policy: Policy, status = 200): void {
  ctx.status = status;
  ctx.set('ETag', `"${policy.version}"`);
  ctx.body = policy;
}

function writeOptions(ctx: Koa.Context): { ifMatch?: string } {
  const ifMatch = ctx.get('If-Match');
  return ifMatch === '' ? {} : { ifMatch };
}
