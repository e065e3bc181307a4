import { Type, type Static } from '@sinclair/typebox';

const Count = Type.Integer({ minimum: 0 });

/** GET /analytics/summary (README "Observability"; analytics/analytics.ts documents the counting). */
export const AnalyticsSummarySchema = Type.Object(
  {
    since: Type.String({ format: 'date-time', description: 'When counting started.' }),
    total: Count,
    allowed: Count,
    denied: Count,
    shadow: Count,
    by_action: Type.Record(Type.String(), Count),
    by_policy: Type.Array(
      Type.Object({ policy_id: Type.String({ description: '(other) folds policies past the tracked number.' }), total: Count, allowed: Count, denied: Count, shadow: Count }),
    ),
    top_tags: Type.Array(Type.Object({ key: Type.String(), value: Type.String(), count: Count }), { description: 'Heavy hitters among key=value tags (Space-Saving).' }),
  },
  { title: 'AnalyticsSummary' },
);

export type AnalyticsSummaryBody = Static<typeof AnalyticsSummarySchema>;
