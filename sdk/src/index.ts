export { createClient, failModeDecision, type Client, type ClientOptions, type FailMode } from './client.js';
export { IgnoredFieldWarnings, consoleLogger, type ClientLogger } from './ignored-fields.js';
export { RateLimitAuthError, RateLimitError, RateLimitInputError, RateLimitUnavailableError } from './errors.js';
export {
  AdminApiError,
  AdminConnectionError,
  calendarPeriodText,
  createAdminClient,
  type AdminClient,
  type AdminClientOptions,
  type AlgorithmFields,
  type AnalyticsSummaryBody,
  type CalendarUnit,
  type FieldProblem,
  type PolicyAlgorithm,
  type PolicyAuditEntry,
  type PolicyFields,
  type PolicyScope,
  type PolicyVersionEntry,
  type ProbeResult,
  type StoredPolicy,
  type WriteOptions,
  type PolicyWarning,
  type WrittenPolicy,
  type ExplainCandidate,
  type Explanation,
} from './admin-client.js';
export type { DenyCacheOptions } from './deny-cache.js';
export type { CircuitBreakerOptions } from './circuit-breaker.js';
export {
  CONTEXT_STRING_FIELDS,
  DECISION_REASONS,
  SIGNAL_TYPES,
  type ContextStringField,
  type Decision,
  type DecisionAction,
  type DecisionReason,
  type Operation,
  type RateLimitClient,
  type RequestContext,
  type SignalType,
} from './types.js';
