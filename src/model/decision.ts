/** The Decision type and its reasons: defined once, with the schema, in schema/decision.ts. */
export { DECISION_REASONS, type Decision, type DecisionReason } from '../schema/decision.js';
