import { expect } from 'chai';
import { alwaysRefuses, applyLimitAction } from '../../src/decision/actions.js';
import { LIMIT_ACTIONS } from '../../src/schema/policy.js';
import type { Policy } from '../../src/policy/types.js';
import type { RequestContext } from '../../src/model/request-context.js';

describe('limit actions: alwaysRefuses agrees with applyLimitAction', () => {
  const contexts = [{ quantity: 1 }, { quantity: 1, request_id: 'r-1' }, { quantity: 1, severity: 'fatal' }, { quantity: 1, severity: 'debug' }] as RequestContext[];
  for (const action of LIMIT_ACTIONS) {
    it(`${action}: ${alwaysRefuses(action) ? 'refuses whatever the draw, request and severity' : 'lets some request through'}`, () => {
      const policy = { policy_id: 'p', action, algorithm: { type: 'fixed_window', sample_rate: 0.5 }, metadata: { min_severity: 'warn' } } as unknown as Policy;
      const answers = contexts.flatMap((ctx) => [0, 0.25, 0.75, 0.999].map((draw) => applyLimitAction(policy, ctx, 100, () => draw).allowed));
      if (alwaysRefuses(action)) expect(answers.every((allowed) => !allowed)).to.equal(true);
      else expect(answers.some((allowed) => allowed)).to.equal(true);
    });
  }
});
