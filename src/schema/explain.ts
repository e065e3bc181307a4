import { Type, type Static } from '@sinclair/typebox';
import { PolicySchema } from './policy.js';

/**
 * What the service says about which policy decides: the tie warnings of a policy write and the answer of
 * POST /rl/v1/explain (docs/matching.md).
 */

/** A tie with another policy of the same layer (the write is still accepted). */
export const PolicyWarningSchema = Type.Object(
  {
    policy_id: Type.String({ description: 'The other policy of the tie.' }),
    message: Type.String({ description: 'Which of the two wins, and that priority settles it.' }),
  },
  { title: 'PolicyWarning' },
);

/** The answer of a create, replace or patch: the stored policy, with `warnings` when it ties another. */
export const WrittenPolicySchema = Type.Object(
  {
    ...PolicySchema.properties,
    warnings: Type.Optional(Type.Array(PolicyWarningSchema, { description: 'Present when the policy ties another of its layer on specificity and priority.' })),
  },
  { title: 'WrittenPolicy', additionalProperties: false },
);

/** Why a candidate does not cover the request. */
export const WHY_NOT = ['match_expr', 'rollout', 'disabled', 'not_valid_now', 'algorithm'] as const;

export const ExplainCandidateSchema = Type.Object(
  {
    policy_id: Type.String(),
    covers: Type.Boolean({ description: 'Its scope, match_expr, rollout, validity and algorithm family all admit the request.' }),
    why_not: Type.Optional(
      Type.String({
        pattern: `^(scope:.+|${WHY_NOT.join('|')})$`,
        description:
          'When it does not cover: `scope:<field>` (the first scope field or `tags.<key>` the request does not satisfy), `match_expr`, `rollout` (outside the rollout share), `disabled`, `not_valid_now` (outside valid_from/valid_to), `algorithm` (a concurrency policy on check, or another one on acquire/release).',
      }),
    ),
    specificity: Type.Integer({ minimum: 0, description: 'Exact field or tag 2 points, `*` 1 point, match_expr 1 point.' }),
    priority: Type.Integer(),
    wins: Type.Boolean({ description: 'It decides its layer (the enforce winner, or the shadow winner of a shadow policy).' }),
  },
  { title: 'ExplainCandidate' },
);

export const ExplainLayerSchema = Type.Object(
  {
    layer: Type.String(),
    winner: Type.Union([Type.String(), Type.Null()], { description: 'The enforce winner\'s policy_id; null when no enforcing policy covers the request.' }),
    candidates: Type.Array(ExplainCandidateSchema, { description: 'In winner order: most specific first, then highest priority, then smallest policy_id.' }),
  },
  { title: 'ExplainLayer' },
);

export const ExplainSchema = Type.Object(
  { layers: Type.Array(ExplainLayerSchema, { description: 'Every layer with a policy the caller may read, in layer-name order.' }) },
  { title: 'Explain' },
);

export type PolicyWarning = Static<typeof PolicyWarningSchema>;
export type ExplainCandidate = Static<typeof ExplainCandidateSchema>;
export type ExplainLayer = Static<typeof ExplainLayerSchema>;
export type Explanation = Static<typeof ExplainSchema>;
