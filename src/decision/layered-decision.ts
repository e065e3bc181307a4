import type { CounterResult, CounterStore, GroupOperation, GroupOutcome, SyncCounterOperations } from '../counters/counter-store.js';
import type { LeaseSpec, RateSpec } from '../counters/counter-spec.js';
import type { LayerMatch, PolicyMatch } from '../matching/matcher.js';
import type { Decision } from '../model/decision.js';
import type { RequestContext } from '../model/request-context.js';
import { applyLimitAction } from './actions.js';
import { layeredDecision } from './layer-verdicts.js';
import type { CounterCall, Evaluation, Operation } from './decision-service.js';

/**
 * One decision over several layers of policies: every layer's enforcing
 * winner is evaluated, and the decision admits only when every one admits. All or nothing: a check's
 * consumes and an acquire's slots are one group of counter operations (CounterStore.group), which a
 * memory store and a single Redis decide in one step. What a refused plan took anyway (another Cluster
 * slot's share, a process lease, a global budget, none of which the group covers) is given back.
 * Peeks, refunds and releases reach every layer, one by one. Shadow winners count beside, as ever.
 */

/** What the DecisionService lends the layered path: its evaluation steps, decisions and last touches. */
export interface LayerHost {
  readonly random: () => number;
  readonly counters: CounterStore;
  readonly onLayerCompensation?: (policyId: string) => void;
  /** Tests only: the store counts at the decision's clock reading (DecisionServiceDeps.clockToStore). */
  readonly clockToStore: boolean;
  keysOf(match: PolicyMatch): string[];
  evaluateSync(ops: SyncCounterOperations, call: CounterCall, match: PolicyMatch, ctx: RequestContext, leaseId: string, nowMs: number | undefined): Evaluation;
  evaluate(operation: Operation, call: CounterCall, match: PolicyMatch, ctx: RequestContext, leaseId: string, sentAt: number): Evaluation | Promise<Evaluation>;
  /** A group's answer for one operation, as evaluate() would have made it. */
  grouped(operation: Operation, match: PolicyMatch, ctx: RequestContext, answer: CounterResult | Error, sentAt: number): Evaluation;
  enforcedDecision(operation: Operation, ctx: RequestContext, evaluation: Evaluation, random: () => number): Decision;
  shadowOnlyDecision(operation: Operation, evaluation: Evaluation): Decision;
  finish(operation: Operation, ctx: RequestContext, started: number, decision: Decision, enforced: Evaluation | undefined, shadowed: Evaluation | undefined): Decision;
  /** The clock a synchronous store counts at: the decision's own reading when they share a clock. */
  storeNow(sync: SyncCounterOperations, nowMs: number): number | undefined;
  /** Gives back what a refused plan's operation took: a consume's units (refund) or an acquire's slot (release). */
  giveBack(operation: Operation, match: PolicyMatch, ctx: RequestContext, leaseId: string, sentAt: number): Evaluation | Promise<Evaluation>;
}

/** A layer's evaluation and whether its operation wrote (a refused plan gives back what did). */
interface Step {
  evaluation: Evaluation;
  committed: boolean;
}

interface Plan {
  operation: Operation;
  ctx: RequestContext;
  call: CounterCall;
  leaseId: string;
  nowMs: number;
  names: string[];
  enforce: PolicyMatch[];
  /** Per enforcing layer: its `sample` draw, made once, before its counter runs. */
  draws: number[];
  shadows: PolicyMatch[];
}

export function decideLayers(
  host: LayerHost, operation: Operation, ctx: RequestContext, call: CounterCall, leaseId: string, started: number, nowMs: number, layers: readonly LayerMatch[],
): Decision | Promise<Decision> {
  const plan: Plan = { operation, ctx, call, leaseId, nowMs, names: [], enforce: [], draws: [], shadows: [] };
  for (const layer of layers) {
    if (layer.enforce !== undefined) {
      plan.names.push(layer.layer);
      plan.enforce.push(layer.enforce);
      plan.draws.push(host.random());
    }
    if (layer.shadow !== undefined) plan.shadows.push(layer.shadow);
  }
  const writes = plan.enforce.length > 1 && (operation === 'acquire' || (operation === 'check' && ctx.quantity > 0));
  const sync = host.counters.sync;
  if (sync !== undefined) {
    const at = host.storeNow(sync, nowMs);
    const steps = writes && sync.group ? groupSteps(host, plan, sync.group(operationsOf(host, plan, plan.enforce.map((_, i) => i)), at), at) : plan.enforce.map((m) => stepOf(host.evaluateSync(sync, call, m, ctx, leaseId, at)));
    const shadowed = plan.shadows.map((m) => host.evaluateSync(sync, call, m, ctx, leaseId, at));
    return conclude(host, plan, started, steps, shadowed);
  }
  const steps = writes ? plannedSteps(host, plan) : Promise.all(plan.enforce.map((m) => host.evaluate(operation, call, m, ctx, leaseId, nowMs))).then((all) => all.map(stepOf));
  const shadowing = Promise.all(plan.shadows.map((m) => host.evaluate(operation, call, m, ctx, leaseId, nowMs)));
  return Promise.all([steps, shadowing]).then(async ([taken, shadowed]) => {
    const decision = conclude(host, plan, started, taken, shadowed);
    if (!decision.allowed && writes) await giveBackTaken(host, plan, taken);
    return decision;
  });
}

/** An operation run alone: it wrote when its counter admitted it (a consume counted, a slot held). */
function stepOf(evaluation: Evaluation): Step {
  return { evaluation, committed: evaluation.result !== undefined && evaluation.result.allowed && !evaluation.waitTimedOut };
}

/** Whether the layer's own action lets a request its counter refused through (its refusal does not refuse the plan). */
function isSoft(plan: Plan, i: number): boolean {
  const match = plan.enforce[i];
  return applyLimitAction(match.compiled.policy, plan.ctx, 0, () => plan.draws[i]).allowed;
}

function operationsOf(host: LayerHost, plan: Plan, positions: readonly number[]): GroupOperation[] {
  return positions.map((i): GroupOperation => {
    const match = plan.enforce[i];
    const keys = host.keysOf(match);
    const soft = isSoft(plan, i);
    if (plan.operation === 'acquire') return { op: 'acquire', keys, spec: match.compiled.spec as LeaseSpec, leaseId: plan.leaseId, soft };
    const cost = Math.min(plan.ctx.quantity * (match.compiled.policy.algorithm.cost_per_request ?? 1), 2 ** 53);
    return { op: 'consume', keys, spec: match.compiled.spec as RateSpec, cost, soft };
  });
}

function groupSteps(host: LayerHost, plan: Plan, outcome: { results: readonly (CounterResult | Error)[]; committed: readonly boolean[] }, at: number | undefined, positions?: readonly number[]): Step[] {
  return outcome.results.map((answer, k) => ({
    evaluation: host.grouped(plan.operation, plan.enforce[positions ? positions[k] : k], plan.ctx, answer, at ?? plan.nowMs),
    committed: outcome.committed[k],
  }));
}

/**
 * A store that has to wait: the layers its group covers (plain counters of a store with `group`) go
 * in one group; a layer served by a process lease or a global budget, or a store without groups,
 * takes on its own, beside it.
 */
async function plannedSteps(host: LayerHost, plan: Plan): Promise<Step[]> {
  const store = host.counters;
  const grouped: number[] = [];
  const alone: number[] = [];
  plan.enforce.forEach((m, i) => (store.group !== undefined && m.compiled.lease === undefined && m.compiled.spec.global === undefined ? grouped : alone).push(i));
  const steps: Step[] = new Array(plan.enforce.length);
  const group: Promise<GroupOutcome> | undefined = grouped.length > 0 ? store.group!(operationsOf(host, plan, grouped), host.clockToStore ? plan.nowMs : undefined) : undefined;
  const own = alone.map((i) => host.evaluate(plan.operation, plan.call, plan.enforce[i], plan.ctx, plan.leaseId, plan.nowMs));
  const [outcome, evaluations] = await Promise.all([group, Promise.all(own)]);
  alone.forEach((i, k) => (steps[i] = stepOf(evaluations[k])));
  if (outcome !== undefined) groupSteps(host, plan, outcome, undefined, grouped).forEach((step, k) => (steps[grouped[k]] = step));
  return steps;
}

/** A refused plan: every operation that wrote anyway gives back what it took, each counted. */
async function giveBackTaken(host: LayerHost, plan: Plan, steps: Step[]): Promise<void> {
  const gives: (Evaluation | Promise<Evaluation>)[] = [];
  steps.forEach((step, i) => {
    if (!step.committed) return;
    const match = plan.enforce[i];
    host.onLayerCompensation?.(match.compiled.policy.policy_id);
    gives.push(host.giveBack(plan.operation, match, plan.ctx, plan.leaseId, plan.nowMs));
  });
  await Promise.all(gives);
}

function conclude(host: LayerHost, plan: Plan, started: number, steps: Step[], shadowed: Evaluation[]): Decision {
  const { operation, ctx } = plan;
  let decision: Decision;
  let deciding: Evaluation | undefined;
  if (steps.length > 0) {
    const decisions = steps.map((s, i) => host.enforcedDecision(operation, ctx, s.evaluation, () => plan.draws[i]));
    decision = layeredDecision(plan.names, decisions);
    deciding = steps[decisions.indexOf(decision)].evaluation;
    if (shadowed.length > 0) {
      decision.metadata.shadow_policy_id = shadowed.map((e) => e.match.compiled.policy.policy_id).join(',');
      decision.metadata.shadow_action = shadowed.map(shadowAction).join(',');
    }
  } else {
    decision = host.shadowOnlyDecision(operation, shadowed[0]);
  }
  return host.finish(operation, ctx, started, decision, deciding, shadowed[0]);
}

/** What a shadow policy would have done (metadata.shadow_action). */
export function shadowAction(evaluation: Evaluation): string {
  if (evaluation.failed) return evaluation.match.compiled.policy.failure_mode === 'fail_open' ? 'allow' : 'deny';
  return evaluation.result.allowed ? 'allow' : evaluation.match.compiled.policy.action;
}
