import { Type, type TSchema } from '@sinclair/typebox';
import { AnalyticsSummarySchema } from './analytics.js';
import { AuditEntrySchema, DeleteResultSchema, PolicyVersionSchema } from './audit.js';
import { DecisionSchema } from './decision.js';
import { ErrorSchema, ValidationReportSchema } from './errors.js';
import { MAX_FIELD_LENGTH, MAX_METADATA_ENTRIES, MAX_TAGS, MAX_TAG_KEY_LENGTH, MAX_TAG_VALUE_LENGTH } from './limits.js';
import { PolicyBodySchema, PolicyPatchSchema, PolicySchema, ROLLOUT_PERCENT } from './policy.js';
import { RequestContextSchema } from './request-context.js';
import { HelloSchema, SnapshotSchema } from './dashboard-stream.js';
import { ServerInfoSchema } from './server-info.js';
import { ExplainSchema, WrittenPolicySchema } from './explain.js';

/**
 * The OpenAPI 3.1 document of the HTTP API (GET /rl/v1/openapi.json), built from the schemas of this
 * directory. `openApiDocument()` keeps the TypeBox schemas as they are (the tests validate real answers
 * against them); `openApiJson()` is the text served, with repeated component schemas written as $refs.
 */

/** Reusable schemas, under #/components/schemas. */
export const COMPONENT_SCHEMAS: Record<string, TSchema> = {
  RequestContext: RequestContextSchema,
  Decision: DecisionSchema,
  PolicyBody: PolicyBodySchema,
  PolicyPatch: PolicyPatchSchema,
  Policy: PolicySchema,
  PolicyVersion: PolicyVersionSchema,
  AuditEntry: AuditEntrySchema,
  DeleteResult: DeleteResultSchema,
  ValidationReport: ValidationReportSchema,
  AnalyticsSummary: AnalyticsSummarySchema,
  ServerInfo: ServerInfoSchema,
  DashboardHello: HelloSchema,
  DashboardSnapshot: SnapshotSchema,
  Error: ErrorSchema,
  WrittenPolicy: WrittenPolicySchema,
  Explain: ExplainSchema,
};

export const ref = (name: keyof typeof COMPONENT_SCHEMAS & string) => Type.Ref(`#/components/schemas/${name}`);

/** Who may call an operation (http/auth-guard.ts `accessOf`): public, any credential, read-only, admin. */
type Access = 'public' | 'decide' | 'read' | 'write';

interface Operation {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  path: string;
  operationId: string;
  tag: string;
  summary: string;
  description?: string;
  access: Access;
  body?: { schema: TSchema; required: boolean; mergePatch?: boolean };
  parameters?: object[];
  /** status → [description, media type, schema] */
  responses: Record<number, [string, string, TSchema]>;
}

const JSON_TYPE = 'application/json';
const TEXT = Type.String();
/** The stream's text: each event's `data` is one JSON message, a hello first, then snapshots. */
const STREAM_EVENTS = Type.String({
  contentMediaType: 'application/json',
  contentSchema: Type.Union([ref('DashboardHello'), ref('DashboardSnapshot')]),
});
const error = (description: string): [string, string, TSchema] => [description, JSON_TYPE, ref('Error')];
const BAD_BODY = {
  400: error('Malformed JSON, or a field of the wrong type or value (the message names the field).'),
  413: error('Body over RL_MAX_BODY_BYTES.'),
  415: error('Body not JSON.'),
};
/** The probes are public only while RL_AUTH_EXEMPT_PATHS lists them (its default does). */
const NOT_EXEMPT = error('Authentication is on and RL_AUTH_EXEMPT_PATHS does not list this path: no or invalid credential.');
const POLICY_ID_PARAM = { name: 'id', in: 'path', required: true, schema: Type.String(), description: 'The policy_id.' };
const IF_MATCH = {
  name: 'If-Match',
  in: 'header',
  required: false,
  schema: Type.String(),
  description: 'The version you read ("3", as the ETag): a change of any other version is a 409.',
};

const decision = (operationId: string, summary: string, description: string): Operation => ({
  method: 'post',
  path: `/rl/v1/${operationId}`,
  operationId,
  tag: 'decisions',
  summary,
  description: `${description} A refusal is still a 200: \`allowed\` is false and \`retry_after\` says when to retry. An empty body is a 400: send \`{}\` for an empty context.`,
  access: 'decide',
  body: { schema: ref('RequestContext'), required: true },
  responses: { 200: ['The decision.', JSON_TYPE, ref('Decision')], ...BAD_BODY },
});

export const OPERATIONS: readonly Operation[] = [
  {
    method: 'get', path: '/healthz', operationId: 'healthz', tag: 'operations', access: 'public',
    summary: 'Liveness: the process answers.',
    responses: { 200: ['ok', 'text/plain', TEXT], 401: NOT_EXEMPT },
  },
  {
    method: 'get', path: '/readyz', operationId: 'readyz', tag: 'operations', access: 'public',
    summary: 'Readiness: send traffic here.',
    responses: { 200: ['ok', 'text/plain', TEXT], 401: NOT_EXEMPT, 503: error('Starting or draining.') },
  },
  {
    method: 'get', path: '/metrics', operationId: 'metrics', tag: 'operations', access: 'read',
    summary: 'Prometheus metrics (text exposition).',
    responses: { 200: ['The exposition.', 'text/plain', TEXT] },
  },
  {
    method: 'get', path: '/rl/v1/info', operationId: 'info', tag: 'operations', access: 'read',
    summary: 'The build and the modes chosen at start-up.',
    responses: { 200: ['Server facts.', JSON_TYPE, ref('ServerInfo')] },
  },
  {
    method: 'get', path: '/rl/v1/stream', operationId: 'stream', tag: 'operations', access: 'read',
    summary: 'Server-sent events for the dashboard: `hello` (the caller, the last hour of per-second rates; DashboardHello), then a `snapshot` per second (DashboardSnapshot).',
    responses: {
      200: ['An endless text/event-stream; it ends when the server drains.', 'text/event-stream', STREAM_EVENTS],
      503: error('Too many streams open.'),
    },
  },
  {
    method: 'get', path: '/rl/v1/openapi.json', operationId: 'openapi', tag: 'operations', access: 'public',
    summary: 'This document.',
    responses: {
      200: ['The OpenAPI 3.1 document.', JSON_TYPE, Type.Object({ openapi: Type.String() })],
      406: error('The Accept header admits no application/json.'),
    },
  },
  {
    method: 'get', path: '/rl/v1/docs', operationId: 'docs', tag: 'operations', access: 'public',
    summary: 'A readable reference page rendered from this document.',
    responses: { 200: ['HTML.', 'text/html', TEXT], 406: error('The Accept header admits no text/html.') },
  },
  decision('check', 'Decide one request and consume from the matching limit.', 'Every algorithm but concurrency. `quantity` 0 peeks: nothing is consumed.'),
  decision('acquire', 'Take a concurrency lease.', 'Concurrency policies only; `metadata.lease_id` names the lease (request_id when given).'),
  decision('release', 'Give a concurrency lease back.', 'An unknown lease answers allowed with reason lease_not_found.'),
  decision('refund', 'Give unused units back to the counter the context consumes from.', '`quantity` (>= 1) is required; a concurrency policy is a 400 naming quantity.'),
  {
    method: 'post', path: '/rl/v1/explain', operationId: 'explain', tag: 'decisions', access: 'read',
    summary: 'Which policy of each layer would decide this request, and why each other candidate would not. Nothing is counted.',
    description: 'The same match a decision makes (docs/matching.md), reported: candidates are the policies the caller may read, disabled ones included; `quantity` is ignored. The query parameter `decision` says which decision to explain: `check` (default) and `refund` consider every algorithm but concurrency, `acquire` and `release` only concurrency.',
    parameters: [{ name: 'decision', in: 'query', required: false, schema: Type.Union([Type.Literal('check'), Type.Literal('refund'), Type.Literal('acquire'), Type.Literal('release')]), description: 'The decision explained (default check).' }],
    body: { schema: ref('RequestContext'), required: true },
    responses: { 200: ['Every layer\'s candidates and winner.', JSON_TYPE, ref('Explain')], ...BAD_BODY },
  },
  {
    method: 'get', path: '/rl/v1/policies', operationId: 'listPolicies', tag: 'policies', access: 'read',
    summary: 'Every policy, sorted by policy_id.',
    responses: { 200: ['The policies.', JSON_TYPE, Type.Array(ref('Policy'))] },
  },
  {
    method: 'post', path: '/rl/v1/policies', operationId: 'createPolicy', tag: 'policies', access: 'write',
    summary: 'Create a policy (version 1).',
    body: { schema: ref('PolicyBody'), required: true },
    responses: {
      201: ['The stored policy (Location and ETag headers), with `warnings` when it ties another policy.', JSON_TYPE, ref('WrittenPolicy')],
      ...BAD_BODY,
      409: error('The policy_id exists.'),
      422: error('The policy fails validation; `errors` lists every problem.'),
    },
  },
  {
    method: 'post', path: '/rl/v1/policies/validate', operationId: 'validatePolicy', tag: 'policies', access: 'read',
    summary: 'Validate a policy without storing it (policy_id optional).',
    body: { schema: ref('PolicyBody'), required: true },
    responses: { 200: ['Whether it is valid, and every problem.', JSON_TYPE, ref('ValidationReport')], ...BAD_BODY },
  },
  {
    method: 'get', path: '/rl/v1/policies/{id}', operationId: 'getPolicy', tag: 'policies', access: 'read',
    summary: 'One policy (ETag: its version).',
    parameters: [POLICY_ID_PARAM],
    responses: { 200: ['The policy.', JSON_TYPE, ref('Policy')], 404: error('No such policy.') },
  },
  {
    method: 'put', path: '/rl/v1/policies/{id}', operationId: 'replacePolicy', tag: 'policies', access: 'write',
    summary: 'Replace a policy (a new version).',
    parameters: [POLICY_ID_PARAM, IF_MATCH],
    body: { schema: ref('PolicyBody'), required: true },
    responses: {
      200: ['The stored policy, with `warnings` when it ties another policy.', JSON_TYPE, ref('WrittenPolicy')],
      ...BAD_BODY,
      404: error('No such policy.'),
      409: error('`version` or If-Match is not current.'),
      422: error('The policy fails validation, or its policy_id differs from the path.'),
    },
  },
  {
    method: 'patch', path: '/rl/v1/policies/{id}', operationId: 'patchPolicy', tag: 'policies', access: 'write',
    summary: 'Change fields of a policy by a JSON merge patch (RFC 7396).',
    parameters: [POLICY_ID_PARAM, IF_MATCH],
    body: { schema: ref('PolicyPatch'), required: true, mergePatch: true },
    responses: {
      200: ['The stored policy, with `warnings` when it ties another policy.', JSON_TYPE, ref('WrittenPolicy')],
      ...BAD_BODY,
      404: error('No such policy.'),
      409: error('`version` or If-Match is not current.'),
      422: error('The patched policy fails validation.'),
    },
  },
  {
    method: 'delete', path: '/rl/v1/policies/{id}', operationId: 'deletePolicy', tag: 'policies', access: 'write',
    summary: 'Delete a policy; its versions and audit stay readable.',
    parameters: [POLICY_ID_PARAM, IF_MATCH],
    // It takes no body, but one sent is read like any other (a DELETE may carry one).
    responses: { 200: ['Deleted.', JSON_TYPE, ref('DeleteResult')], ...BAD_BODY, 404: error('No such policy.'), 409: error('If-Match is not current.') },
  },
  {
    method: 'post', path: '/rl/v1/policies/{id}/rollout', operationId: 'rolloutPolicy', tag: 'policies', access: 'write',
    summary: 'Set the rollout percentage.',
    parameters: [POLICY_ID_PARAM, IF_MATCH],
    body: { schema: Type.Object({ rollout_percent: Type.Integer(ROLLOUT_PERCENT) }), required: true },
    responses: {
      200: ['The stored policy.', JSON_TYPE, ref('Policy')],
      ...BAD_BODY,
      404: error('No such policy.'),
      409: error('If-Match is not current.'),
    },
  },
  {
    method: 'post', path: '/rl/v1/policies/{id}/rollback', operationId: 'rollbackPolicy', tag: 'policies', access: 'write',
    summary: 'A new version whose content is version N\'s.',
    parameters: [POLICY_ID_PARAM, IF_MATCH],
    body: { schema: Type.Object({ version: Type.Integer({ minimum: 1 }) }), required: true },
    responses: {
      200: ['The stored policy.', JSON_TYPE, ref('Policy')],
      ...BAD_BODY,
      404: error('No such policy, or no such version.'),
      409: error('If-Match is not current.'),
      422: error('That version no longer validates.'),
    },
  },
  {
    method: 'get', path: '/rl/v1/policies/{id}/versions', operationId: 'policyVersions', tag: 'policies', access: 'read',
    summary: 'Every version of a policy, ascending (deleted policies too).',
    parameters: [POLICY_ID_PARAM],
    responses: { 200: ['The versions.', JSON_TYPE, Type.Array(ref('PolicyVersion'))], 404: error('The policy never existed.') },
  },
  {
    method: 'get', path: '/rl/v1/policies/{id}/audit', operationId: 'policyAudit', tag: 'policies', access: 'read',
    summary: 'Every change of a policy, oldest first.',
    parameters: [POLICY_ID_PARAM],
    responses: { 200: ['The audit entries.', JSON_TYPE, Type.Array(ref('AuditEntry'))], 404: error('The policy never existed.') },
  },
  {
    method: 'get', path: '/rl/v1/analytics/summary', operationId: 'analyticsSummary', tag: 'analytics', access: 'read',
    summary: 'Decisions by outcome, action and policy, and the heaviest tags.',
    parameters: [{ name: 'top', in: 'query', required: false, schema: Type.Integer({ minimum: 1, maximum: 10_000 }), description: 'Cut by_policy and top_tags to N rows.' }],
    responses: { 200: ['The summary.', JSON_TYPE, ref('AnalyticsSummary')], 400: error('`top` is not a positive integer up to 10000.') },
  },
];

const REQUEST_ID_HEADER = { description: 'The caller\'s X-Request-Id when well-formed, else a fresh one.', schema: Type.String() };

function responsesOf(op: Operation): Record<string, object> {
  const all: Record<number, [string, string, TSchema]> = { ...op.responses };
  if (op.access !== 'public') {
    all[401] = error('No or invalid credential (with WWW-Authenticate).');
    all[403] = error(op.access === 'write' ? 'The caller is not admin.' : 'The caller\'s role may not do this.');
  }
  const out: Record<string, object> = {};
  for (const [status, [description, mediaType, schema]] of Object.entries(all)) {
    out[status] = { description, headers: { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } }, content: { [mediaType]: { schema } } };
  }
  return out;
}

function operationObject(op: Operation): object {
  const out: Record<string, unknown> = { operationId: op.operationId, tags: [op.tag], summary: op.summary };
  if (op.description) out.description = op.description;
  if (op.parameters) out.parameters = op.parameters;
  if (op.body) {
    const content: Record<string, object> = { [JSON_TYPE]: { schema: op.body.schema } };
    if (op.body.mergePatch) content['application/merge-patch+json'] = { schema: op.body.schema };
    out.requestBody = { required: op.body.required, content };
  }
  out.responses = responsesOf(op);
  // The default (below) asks for a credential; public operations need none.
  if (op.access === 'public') out.security = [];
  return out;
}

const DESCRIPTION = `Rate-limit decisions, policy management and analytics.

**Errors** are \`{"error": "...", "status": N}\` (a 422 adds \`errors: [{field, message}]\`); every answer carries \`X-Request-Id\`. A wrong method on a known path is a 405 with \`Allow\`; an unknown path a 404.

**Authentication** (when RL_AUTH_ENABLED): an API key in \`X-Api-Key\` or \`Authorization: Bearer <key>\` (RL_AUTH_MODE=apikey), or an HS256 JWT as \`Authorization: Bearer <jwt>\` (RL_AUTH_MODE=jwt). Roles: \`admin\` may do everything, \`read-only\` the GET routes, decisions and policy validation. Decisions need any valid credential.

**Bounds** (400 for a request, 422 for a policy, naming the field): at most ${MAX_TAGS} tags per request and per policy scope, tag names up to ${MAX_TAG_KEY_LENGTH} characters and values up to ${MAX_TAG_VALUE_LENGTH}, string fields and scope values up to ${MAX_FIELD_LENGTH}, at most ${MAX_METADATA_ENTRIES} metadata entries.`;

/** The package is private (package.json) and grants no licence. */
const LICENSE = { name: 'Proprietary: no licence granted', identifier: 'LicenseRef-Proprietary' };

/** The document with its schemas as TypeBox objects (see openApiJson for the served text). */
export function openApiDocument(version = '0.1.0'): Record<string, any> {
  const paths: Record<string, Record<string, object>> = {};
  for (const op of OPERATIONS) (paths[op.path] ??= {})[op.method] = operationObject(op);
  return {
    openapi: '3.1.0',
    info: { title: 'Rate-limit decision service', version, description: DESCRIPTION, license: LICENSE },
    // Relative: the document describes the server that serves it, whatever its address.
    servers: [{ url: '/', description: 'The server that serves this document.' }],
    tags: [
      { name: 'decisions', description: 'check, acquire, release, refund: a RequestContext in, a Decision out.' },
      { name: 'policies', description: 'Policies and their lifecycle: versions, audit, rollout, rollback.' },
      { name: 'analytics', description: 'What was decided.' },
      { name: 'operations', description: 'Probes, metrics and this reference.' },
    ],
    security: [{ ApiKey: [] }, { ApiKeyBearer: [] }, { JwtBearer: [] }],
    paths,
    components: {
      schemas: COMPONENT_SCHEMAS,
      headers: { RequestId: REQUEST_ID_HEADER },
      securitySchemes: {
        ApiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key', description: 'RL_AUTH_MODE=apikey: a key of RL_AUTH_API_KEYS.' },
        ApiKeyBearer: { type: 'http', scheme: 'bearer', description: 'RL_AUTH_MODE=apikey: the same key as `Authorization: Bearer <key>`.' },
        JwtBearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'RL_AUTH_MODE=jwt: HS256, exp/nbf checked, role from RL_AUTH_ROLE_CLAIM.' },
      },
    },
  };
}

/**
 * The served text: the document as JSON, where a schema equal to a component (the Policy inside an
 * AuditEntry, say) is written as a $ref to it. Component schemas carry a distinct `title`, so equality
 * of the JSON text means the same schema.
 */
export function openApiJson(version?: string): string {
  const doc = JSON.parse(JSON.stringify(openApiDocument(version))) as Record<string, any>;
  const byText = new Map<string, string>();
  for (const [name, schema] of Object.entries(doc.components.schemas)) byText.set(JSON.stringify(schema), name);
  const dedupe = (value: unknown, ownName?: string): unknown => {
    if (Array.isArray(value)) return value.map((v) => dedupe(v));
    if (typeof value !== 'object' || value === null) return value;
    const name = byText.get(JSON.stringify(value));
    if (name !== undefined && name !== ownName) return { $ref: `#/components/schemas/${name}` };
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, dedupe(v)]));
  };
  for (const name of Object.keys(doc.components.schemas)) doc.components.schemas[name] = dedupe(doc.components.schemas[name], name);
  doc.paths = dedupe(doc.paths);
  return JSON.stringify(doc);
}
