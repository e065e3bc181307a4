import { Type, type Static } from '@sinclair/typebox';
import { PolicySchema } from './policy.js';

/** What a change did, as its audit entry names it. */
export const AUDIT_ACTIONS = ['create', 'update', 'patch', 'rollout', 'rollback', 'delete'] as const;

const Instant = Type.String({ format: 'date-time' });
const UnixSeconds = Type.Integer({ minimum: 0 });

/** GET /policies/{id}/versions: one stored version. */
export const PolicyVersionSchema = Type.Object(
  { policy_id: Type.String(), version: Type.Integer({ minimum: 1 }), created_at: Instant, created_at_unix: UnixSeconds, snapshot: PolicySchema },
  { title: 'PolicyVersion' },
);

/** GET /policies/{id}/audit: one change. */
export const AuditEntrySchema = Type.Object(
  {
    audit_id: Type.String(),
    policy_id: Type.String(),
    action_type: Type.Union(AUDIT_ACTIONS.map((a) => Type.Literal(a))),
    changed_by: Type.String({ description: 'The caller\'s subject; anonymous without authentication, policy-file for seeding.' }),
    changed_at: Instant,
    changed_at_unix: UnixSeconds,
    version: Type.Integer({ minimum: 1, description: 'The version this change produced (delete: the version deleted).' }),
    old_value: Type.Union([PolicySchema, Type.Null()]),
    new_value: Type.Union([PolicySchema, Type.Null()]),
    restored_version: Type.Optional(
      Type.Integer({ minimum: 1, description: 'A rollback only: the version whose content it restored (entries written before this field existed lack it).' }),
    ),
  },
  { title: 'AuditEntry' },
);

/** DELETE /policies/{id}. */
export const DeleteResultSchema = Type.Object({ deleted: Type.Literal(true), policy_id: Type.String() }, { title: 'DeleteResult' });

export type PolicyVersionBody = Static<typeof PolicyVersionSchema>;
export type AuditEntryBody = Static<typeof AuditEntrySchema>;
