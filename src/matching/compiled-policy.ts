import type { CompiledLease, CounterSpec } from '../counters/counter-spec.js';
import type { ScopeField } from '../model/request-context.js';
import type { MatchExprEvaluator } from '../policy/match-expr.js';
import type { Policy } from '../policy/types.js';
import type { ClientNetwork } from './client-network.js';
import type { PolicyFamily } from './layer-index.js';

/** What the matcher makes of a policy and what it answers about a request (matcher.ts is the matcher). */

/** `check` considers every algorithm but concurrency; `acquire`/`release` only concurrency. */
export type { PolicyFamily } from './layer-index.js';

/**
 * What a decision needs of one policy, and nothing else: a snapshot holds one per policy (100,000 and
 * more), so every list here has its exact length and lists, specs and wildcards that several policies
 * have in common are one shared (frozen in spirit: never mutate) object. What only building the index
 * needs (the exact-valued fields and tags) lives in the build's `Draft` and is dropped with it.
 */
export interface CompiledPolicy {
  policy: Policy;
  /** Shared by every policy of this snapshot whose algorithm has the same parameters. */
  spec: CounterSpec;
  /** Exact field 2 points, `*` 1 point, each tag as a field, match_expr 1 point. */
  specificity: number;
  family: PolicyFamily;
  /** The policy's layer ("default" when it names none). */
  layer: string;
  /**
   * Orders the winner order (smaller = better): specificity desc, priority desc, policy_id asc. Not a
   * position: ranks are spaced out so a later policy gets one between its neighbours, and may all be
   * renumbered by a later change (the one field that is not fixed once indexed; only matching reads it).
   */
  rank: number;
  enforce: boolean;
  rolloutPercent: number;
  /** Unix milliseconds; 0 = unbounded. */
  validFromMs: number;
  validToMs: number;
  /** `*` parts in identity order (sorted by identity name). */
  wildcards: readonly Wildcard[];
  matchExpr?: MatchExprEvaluator;
  /** The process level's capacity lease (the policy's own `lease`), compiled once; undefined without one. */
  lease?: CompiledLease;
  /**
   * Hot-path copies, flat to keep pointer chasing down: exact fields and tags still to compare as
   * [name, value, name, value, ...] (the pair the policy is indexed under is left out: its bucket
   * already guarantees it), and the names of the `*` fields and tags that must be present.
   */
  checkFields: string[];
  checkTags: string[];
  wildFields: ScopeField[];
  wildTags: string[];
  /**
   * The exact pair the index holds it under, set as it is indexed (matching never reads it; taking it
   * out and explain do): the field's name or `tags.<key>`, and the value; undefined for the fallback list.
   */
  home: string | undefined;
  homeValue: string;
}

export interface Wildcard {
  /** The identity name: the field name, or `tags.<key>`. */
  name: string;
  field?: ScopeField;
  tag?: string;
  /** `source_ip` only: counts client networks, not address strings (the policy's source_ip_prefix). */
  network?: ClientNetwork;
}

export interface PolicyMatch {
  compiled: CompiledPolicy;
  /** For each `*` scope field in sorted field order, [fieldName, requestValue] flattened. */
  identity: string[];
}

/** One layer's winners for a request: its best enforce-mode and best shadow-mode candidate. */
export interface LayerMatch {
  layer: string;
  enforce?: PolicyMatch;
  shadow?: PolicyMatch;
}

/**
 * What `match` answers. The top-level fields are the winners of the first layer (in byte order of layer
 * names) that has any; `layer` is "default" when no layer has one. `layers` is set only when two or
 * more layers have a winner: every such layer, in layer-name order (the first is the top-level one).
 * A request matched in one layer thus costs one object, as before layers.
 */
export interface MatchResult extends LayerMatch {
  layers?: readonly LayerMatch[];
}

/** A policy the matcher could not compile (validation should have refused it); it never matches. */
export interface SkippedPolicy {
  policy_id: string;
  reason: string;
}
