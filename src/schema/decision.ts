import { DECISION_REASONS } from '@rl/client/types';
import { Type, type Static } from '@sinclair/typebox';

/** Reasons of README "The request", the SDK's list (clients switch on them; the SDK adds only its own service_unavailable). */
export { DECISION_REASONS };

const ms = (description: string) => Type.Integer({ minimum: 0, description: `${description} (milliseconds).` });

/** One layer's verdict within a decision over several layers of policies. */
export const LayerVerdictSchema = Type.Object(
  {
    layer: Type.String(),
    policy_id: Type.String({ description: 'The layer\'s enforcing policy.' }),
    allowed: Type.Boolean(),
    action: Type.String(),
    reason: Type.Union(DECISION_REASONS.map((r) => Type.Literal(r))),
    remaining: Type.Integer(),
    limit: Type.Integer(),
    window: ms('The period `limit` applies to'),
    reset_after: ms('Until the layer\'s window or bucket is whole again'),
    retry_after: ms('When this layer would admit a retry'),
  },
  { title: 'LayerVerdict' },
);

/** The answer of check, acquire, release and refund (README "What a decision means"). Always 200: a refusal is `allowed: false`. */
export const DecisionSchema = Type.Object(
  {
    allowed: Type.Boolean(),
    action: Type.String({ description: 'allow, shadow_only, or the matched policy\'s action (deny, delay, drop, sample, downgrade, drop_low_priority).' }),
    reason: Type.Union(DECISION_REASONS.map((r) => Type.Literal(r))),
    matched_policy_id: Type.String({ description: 'Empty when no policy matched.' }),
    remaining: Type.Integer({ description: 'Units left after this request.' }),
    retry_after: ms('When to retry; 0 when there is nothing to wait for'),
    reset_after: ms('Until the window or bucket is whole again'),
    limit: Type.Integer({ description: 'The matched limit.' }),
    window: ms('The period `limit` applies to; 0 for concurrency and when no policy matched'),
    shadow_mode: Type.Boolean(),
    metadata: Type.Record(Type.String(), Type.String(), { description: 'lease_id, shadow_policy_id, shadow_action, peek, …' }),
    layers: Type.Optional(
      Type.Array(LayerVerdictSchema, {
        description: 'Every layer with an enforcing policy, in layer-name order; present only when there are two or more.',
      }),
    ),
  },
  { title: 'Decision' },
);

export type DecisionReason = (typeof DECISION_REASONS)[number];
export type Decision = Omit<Static<typeof DecisionSchema>, 'reason' | 'layers'> & { reason: DecisionReason; layers?: LayerVerdict[] };
export type LayerVerdict = Omit<Static<typeof LayerVerdictSchema>, 'reason'> & { reason: DecisionReason };
