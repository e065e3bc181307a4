import { CONTEXT_STRING_FIELDS, SIGNAL_TYPES, type ContextStringField, type SignalType } from '@rl/client/types';
import { Type, type Static, type TLiteral, type TOptional, type TString, type TUnion } from '@sinclair/typebox';
import { MAX_FIELD_LENGTH, MAX_TAGS, MAX_TAG_KEY_LENGTH, MAX_TAG_VALUE_LENGTH } from './limits.js';

/**
 * The RequestContext of check, acquire, release and refund (README "The request"): the one
 * definition its TypeScript type, the OpenAPI document and the field lists of model/request-context.ts
 * (whose hand-tuned parser validates it on the decision path) come from.
 */

// The field and signal-type lists are the SDK's (the SDK cannot import the server; the server may
// import the SDK), so a client's RequestContext and this schema share one definition of them.
export { CONTEXT_STRING_FIELDS, SIGNAL_TYPES, type ContextStringField, type SignalType } from '@rl/client/types';

/**
 * What each field means: the OpenAPI document's descriptions and README's "The request" table (a test
 * keeps that table equal to these).
 */
export const CONTEXT_FIELD_DESCRIPTIONS: Record<ContextStringField, string> = {
  request_id: 'This request\'s id: the lease id of acquire and release (else a digest of the other fields), and what `sample` draws by. Never a scope field.',
  org_id: 'The organisation the request belongs to.',
  tenant_id: 'The tenant the request belongs to (counted per tenant in `rl_tenant_decisions_total`).',
  application: 'The application name.',
  service: 'The service name.',
  environment: 'The environment, e.g. `prod`, `staging`, `dev`.',
  signal_type: `What is being limited: one of ${SIGNAL_TYPES.map((t) => `\`${t}\``).join(', ')}.`,
  operation: 'The operation name.',
  endpoint: 'The endpoint path, e.g. `/orders`.',
  method: 'The HTTP method (`GET`, `POST`, ...: compared case-insensitively) or gRPC method; other values compare exactly.',
  user_id: 'The user the request is made for.',
  api_key: 'The API key the caller of your service used (a request field to limit by, not a credential of this service).',
  client_id: 'The client identifier.',
  source_ip: 'The client IP address (IPv4 or IPv6); a `*` scope counts by the network `source_ip_prefix` gives.',
  region: 'The region identifier.',
  resource: 'The resource being used, e.g. a model or a table.',
  severity: 'The log severity (`trace`, `debug`, `info`, `warn`, `error`, `fatal`), read by `drop_low_priority`.',
  span_name: 'The trace span name.',
  topic: 'The message topic.',
  consumer_group: 'The consumer group name.',
  job_type: 'The background job type.',
};
export const QUANTITY_DESCRIPTION =
  'Units this request takes (default 1; a decimal string is accepted too). 0 on check is a peek: nothing is consumed. Required (>= 1) on refund.';
export const TAGS_DESCRIPTION = `Free key-value tags (string values; at most ${MAX_TAGS}), matched by a policy's \`scope.tags\` and readable in \`match_expr\`.`;

const contextString = (field: ContextStringField) =>
  field === 'signal_type'
    ? Type.Union(SIGNAL_TYPES.map((t) => Type.Literal(t)), { description: CONTEXT_FIELD_DESCRIPTIONS[field] })
    : Type.String({ maxLength: MAX_FIELD_LENGTH, description: CONTEXT_FIELD_DESCRIPTIONS[field] });

/** Each field's schema type, spelled out so Static<> gives `string` (and SignalType), not `unknown`. */
type ContextStringSchemas = {
  [K in ContextStringField]: TOptional<K extends 'signal_type' ? TUnion<TLiteral<SignalType>[]> : TString>;
};
const stringFields = Object.fromEntries(
  CONTEXT_STRING_FIELDS.map((field) => [field, Type.Optional(contextString(field))]),
) as ContextStringSchemas;

/** Tag maps (request tags, policy scope.tags): string values under bounded names, a bounded count. */
export function tagMap(valueOptions: { minLength?: number } = {}, description?: string) {
  return Type.Record(Type.String(), Type.String({ maxLength: MAX_TAG_VALUE_LENGTH, ...valueOptions }), {
    maxProperties: MAX_TAGS,
    propertyNames: { maxLength: MAX_TAG_KEY_LENGTH },
    ...(description === undefined ? {} : { description }),
  });
}

export const RequestContextSchema = Type.Object(
  {
    ...stringFields,
    quantity: Type.Optional(
      Type.Union([Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), Type.String({ pattern: '^[0-9]+$' })], {
        description: QUANTITY_DESCRIPTION,
      }),
    ),
    tags: Type.Optional(tagMap({}, TAGS_DESCRIPTION)),
  },
  {
    title: 'RequestContext',
    description:
      'Who is asking and for what. Unknown fields are ignored and named in the answer\'s `metadata.ignored_fields`; a wrong type or value is a 400 naming the field.',
  },
);

/**
 * Where a parsed RequestContext keeps the names of the input's fields it ignored (absent when none).
 * A symbol, so the note is no field: JSON.stringify (the sidecar forwarding a context), scope matching
 * and match_expr never see it.
 */
export const IGNORED_FIELDS: unique symbol = Symbol('ignoredFields');

/** The ignored fields of one request, as `metadata.ignored_fields` names them and as the metric counts them. */
export interface IgnoredFields {
  /** Every ignored field (the metric counts them all). */
  count: number;
  /** `metadata.ignored_fields`: the first names, each cut short, comma-separated (model/request-context.ts). */
  names: string;
}

/** The RequestContext after parsing: quantity resolved and tags always present. */
export type RequestContext = { [K in ContextStringField]?: string } & {
  quantity: number;
  tags: Record<string, string>;
  [IGNORED_FIELDS]?: IgnoredFields;
};

/** What a client may send (quantity and tags optional, quantity possibly a decimal string). */
export type RequestContextBody = Static<typeof RequestContextSchema>;
