import { fileURLToPath } from 'node:url';

/** Where the recorded validator answers live, and how the bodies were drawn (test/policy/record-validator-answers.ts). */
export const VALIDATOR_ANSWERS_FILE = fileURLToPath(new URL('./fixtures/validator-answers.txt', import.meta.url));
export const VALIDATOR_ANSWERS_RUNS = 4000;
export const VALIDATOR_ANSWERS_SEED = 20260037;
