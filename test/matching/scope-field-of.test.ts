import { expect } from 'chai';
import { SCOPE_FIELDS, type RequestContext } from '../../src/model/request-context.js';
import { scopeFieldOf } from '../../src/model/scope-field-of.js';

describe('scopeFieldOf', () => {
  it('reads every scope field as ctx[field] does, and an absent one as undefined', () => {
    const full = { quantity: 1, tags: {} } as RequestContext;
    SCOPE_FIELDS.forEach((field, i) => ((full as unknown as Record<string, string>)[field] = `value-${i}`));
    for (const field of SCOPE_FIELDS) {
      expect(scopeFieldOf(full, field), field).to.equal(full[field]);
      expect(scopeFieldOf({ quantity: 1, tags: {} }, field), field).to.equal(undefined);
    }
  });
});
