import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { validatePolicy } from '../../src/policy/validate.js';
import { VALIDATOR_ANSWERS_FILE, VALIDATOR_ANSWERS_RUNS, VALIDATOR_ANSWERS_SEED } from './validator-answers-file.js';
import { answerOf, digestOf, policyBodies } from './validator-bodies.js';

/**
 * The validator answers every body of a seeded generator (valid and invalid, every algorithm, calendar
 * periods, budget_shares, layer, lease, match_expr, the quota shape) exactly as it did when the answers
 * were recorded (test/policy/record-validator-answers.ts): validity, every field and message in order, and
 * the normalised policy, byte for byte.
 */
describe('validatePolicy: the recorded answers', () => {
  const recorded = readFileSync(VALIDATOR_ANSWERS_FILE, 'utf8').split('\n').filter((line) => line !== '');
  const bodies = fc.sample(policyBodies, { numRuns: VALIDATOR_ANSWERS_RUNS, seed: VALIDATOR_ANSWERS_SEED });

  it('draws valid and invalid bodies alike', () => {
    const valid = bodies.filter((body) => validatePolicy(body).ok).length;
    expect(valid).to.be.greaterThan(VALIDATOR_ANSWERS_RUNS / 10).and.lessThan(VALIDATOR_ANSWERS_RUNS / 2);
  });

  it('answers each body as recorded', () => {
    expect(recorded.length).to.equal(VALIDATOR_ANSWERS_RUNS);
    bodies.forEach((body, i) => {
      const answer = answerOf(validatePolicy, body);
      expect(digestOf(answer), `body ${i}: ${JSON.stringify(body).slice(0, 2000)}\nanswers now: ${answer.slice(0, 2000)}`).to.equal(recorded[i]);
    });
  });
});
