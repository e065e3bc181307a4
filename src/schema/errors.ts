import { Type, type Static } from '@sinclair/typebox';

/** One field-level problem; `field` is a dotted path such as `algorithm.window`. */
export const FieldErrorSchema = Type.Object({ field: Type.String(), message: Type.String() }, { title: 'FieldError' });

/** Every error answer (docs/reference.md "Statuses"); a 422 adds the field errors. */
export const ErrorSchema = Type.Object(
  {
    error: Type.String({ description: 'What went wrong; names the field for 400 and 422.' }),
    status: Type.Integer({ minimum: 400, maximum: 599 }),
    errors: Type.Optional(Type.Array(FieldErrorSchema, { description: '422: every problem of the policy.' })),
  },
  { title: 'Error' },
);

/** POST /policies/validate. */
export const ValidationReportSchema = Type.Object({ valid: Type.Boolean(), errors: Type.Array(FieldErrorSchema) }, { title: 'ValidationReport' });

export type FieldError = Static<typeof FieldErrorSchema>;
export type ErrorBody = Static<typeof ErrorSchema>;
export type ValidationReport = Static<typeof ValidationReportSchema>;
