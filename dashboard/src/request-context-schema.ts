/**
 * The RequestContext's JSON Schema, written into the bundle at build time (dashboard/build.ts) from
 * the server's one TypeBox definition (src/schema/request-context.ts): a field added there appears in
 * "Try a decision" with the next build, with nothing to change here.
 */

/** The parts of a JSON Schema the form reads. */
export interface FieldSchema {
  type?: string;
  const?: string;
  anyOf?: FieldSchema[];
  description?: string;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  maxProperties?: number;
}

export interface ObjectSchema {
  properties: Record<string, FieldSchema>;
}

declare const __RL_REQUEST_CONTEXT_SCHEMA__: ObjectSchema;

export const REQUEST_CONTEXT_SCHEMA: ObjectSchema = __RL_REQUEST_CONTEXT_SCHEMA__;
