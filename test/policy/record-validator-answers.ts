/**
 * Records the policy validator's answers to a fixed, seeded set of generated bodies into
 * test/policy/fixtures/validator-answers.txt (the SHA-256 of each answer, one a line, in the order the
 * seeded generator draws the bodies; the answers themselves run to megabytes of echoed long strings), so that a rewrite of the
 * validator can be shown to answer byte for byte as before (test/policy/validator-answers.test.ts).
 * Rerun only when an answer is meant to change:  npx tsx test/policy/record-validator-answers.ts
 */
import { writeFileSync } from 'node:fs';
import fc from 'fast-check';
import { validatePolicy } from '../../src/policy/validate.js';
import { answerOf, digestOf, policyBodies } from './validator-bodies.js';
import { VALIDATOR_ANSWERS_FILE, VALIDATOR_ANSWERS_RUNS, VALIDATOR_ANSWERS_SEED } from './validator-answers-file.js';

const bodies = fc.sample(policyBodies, { numRuns: VALIDATOR_ANSWERS_RUNS, seed: VALIDATOR_ANSWERS_SEED });
writeFileSync(VALIDATOR_ANSWERS_FILE, bodies.map((body) => `${digestOf(answerOf(validatePolicy, body))}\n`).join(''));
console.log(`${bodies.length} answers written to ${VALIDATOR_ANSWERS_FILE}`);
