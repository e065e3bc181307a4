/**
 * The API's shapes, defined once. TypeBox rather than hand-written JSON Schema with ajv: a TypeBox
 * schema IS a JSON Schema object (so it drops into the OpenAPI 3.1 document unchanged), the TypeScript
 * types come from the same object (`Static<typeof X>`), and TypeCompiler/Value check values against it
 * without a second schema language or code generation step.
 *
 * What comes from here: the TypeScript types (model/decision.ts, model/request-context.ts), the field
 * lists, enums and bounds the validators enforce (model/request-context.ts on the decision path,
 * policy/validate.ts for policies), and the OpenAPI document (openapi.ts, served at /rl/v1/openapi.json).
 */

export * from './analytics.js';
export * from './audit.js';
export * from './dashboard-stream.js';
export * from './decision.js';
export * from './errors.js';
export * from './limits.js';
export * from './policy.js';
export * from './request-context.js';
export * from './server-info.js';

