import { Type, type Static, type TOptional, type TSchema } from '@sinclair/typebox';
import { MAX_FIELD_LENGTH, MAX_TAGS, MAX_TAG_KEY_LENGTH, MAX_TAG_VALUE_LENGTH } from './limits.js';

/**
 * The RequestContext of check, acquire, release and refund (CONTRACT.md "RequestContext"): the one
 * definition its TypeScript type, the OpenAPI document and the field lists of model/request-context.ts
 * (whose hand-tuned parser validates it on the decision path) come from.
 */

export const SIGNAL_TYPES = ['http', 'grpc', 'log', 'trace', 'event', 'auth', 'job', 'custom'] as const;
export type SignalType = (typeof SIGNAL_TYPES)[number];

/** Every string field of a RequestContext, in the spec's order. Scope fields are these minus request_id. */
export const CONTEXT_STRING_FIELDS = [
  'request_id', 'org_id', 'tenant_id', 'application', 'service', 'environment', 'signal_type',
  'operation', 'endpoint', 'method', 'user_id', 'api_key', 'client_id', 'source_ip', 'region',
  'resource', 'severity', 'span_name', 'topic', 'consumer_group', 'job_type',
] as const;
export type ContextStringField = (typeof CONTEXT_STRING_FIELDS)[number];

const contextString = (field: ContextStringField) =>
  field === 'signal_type'
    ? Type.Union(SIGNAL_TYPES.map((t) => Type.Literal(t)), { description: 'One of the eight signal types.' })
    : Type.String({ maxLength: MAX_FIELD_LENGTH });

const stringFields = {} as Record<ContextStringField, TOptional<TSchema>>;
for (const field of CONTEXT_STRING_FIELDS) stringFields[field] = Type.Optional(contextString(field));

/** Tag maps (request tags, policy scope.tags): string values under bounded names, a bounded count. */
export function tagMap(valueOptions: { minLength?: number } = {}) {
  return Type.Record(Type.String(), Type.String({ maxLength: MAX_TAG_VALUE_LENGTH, ...valueOptions }), {
    maxProperties: MAX_TAGS,
    propertyNames: { maxLength: MAX_TAG_KEY_LENGTH },
  });
}

export const RequestContextSchema = Type.Object(
  {
    ...stringFields,
    quantity: Type.Optional(
      Type.Union([Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), Type.String({ pattern: '^[0-9]+$' })], {
        description:
          'Units this request takes (default 1; a decimal string is accepted too). 0 on check is a peek: nothing is consumed. Required (>= 1) on refund.',
      }),
    ),
    tags: Type.Optional(tagMap()),
  },
  {
    title: 'RequestContext',
    description: 'Who is asking and for what. Unknown fields are ignored; a wrong type or value is a 400 naming the field.',
  },
);

/** The RequestContext after parsing: quantity resolved and tags always present. */
export type RequestContext = { [K in ContextStringField]?: string } & {
  quantity: number;
  tags: Record<string, string>;
};

/** What a client may send (quantity and tags optional, quantity possibly a decimal string). */
export type RequestContextBody = Static<typeof RequestContextSchema>;
