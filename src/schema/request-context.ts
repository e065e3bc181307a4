import { CONTEXT_STRING_FIELDS, SIGNAL_TYPES, type ContextStringField, type SignalType } from '@rl/client/types';
import { Type, type Static, type TLiteral, type TOptional, type TString, type TUnion } from '@sinclair/typebox';
import { MAX_FIELD_LENGTH, MAX_TAGS, MAX_TAG_KEY_LENGTH, MAX_TAG_VALUE_LENGTH } from './limits.js';

/**
 * The RequestContext of check, acquire, release and refund (CONTRACT.md "RequestContext"): the one
 * definition its TypeScript type, the OpenAPI document and the field lists of model/request-context.ts
 * (whose hand-tuned parser validates it on the decision path) come from.
 */

// The field and signal-type lists are the SDK's (the SDK cannot import the server; the server may
// import the SDK), so a client's RequestContext and this schema share one definition of them.
export { CONTEXT_STRING_FIELDS, SIGNAL_TYPES, type ContextStringField, type SignalType } from '@rl/client/types';

const contextString = (field: ContextStringField) =>
  field === 'signal_type'
    ? Type.Union(SIGNAL_TYPES.map((t) => Type.Literal(t)), { description: 'One of the eight signal types.' })
    : Type.String({ maxLength: MAX_FIELD_LENGTH });

/** Each field's schema type, spelled out so Static<> gives `string` (and SignalType), not `unknown`. */
type ContextStringSchemas = {
  [K in ContextStringField]: TOptional<K extends 'signal_type' ? TUnion<TLiteral<SignalType>[]> : TString>;
};
const stringFields = Object.fromEntries(
  CONTEXT_STRING_FIELDS.map((field) => [field, Type.Optional(contextString(field))]),
) as ContextStringSchemas;

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
