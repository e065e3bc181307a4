import type { CounterResult, CounterStore, GroupOperation, GroupOutcome, SyncCounterOperations } from '../counters/counter-store.js';
import type { ConcurrencySpec, RateSpec } from '../counters/counter-spec.js';
import type { LayerMatch, PolicyMatch } from '../matching/matcher.js';
import type { Decision } from '../model/decision.js';
import type { RequestContext } from '../model/request-context.js';
import { alwaysRefuses, applyLimitAction } from './actions.js';
import { layeredDecision } from './layer-verdicts.js';
import { neverFitsMatch, readingCheckCall } from './never-fits.js';
import type { CounterAsk } from './counter-evaluator.js';
import type { CounterCall, Evaluation, Operation } from './decision-types.js';

/**
 * One decision over several layers of policies: every layer's enforcing
 * winner is evaluated, and the decision admits only when every one admits. All or nothing: a check's
 * consumes and an acquire's slots are one group of counter operations (CounterStore.group), which a
 * memory store and a single Redis decide in one step. What a refused plan took anyway (another Cluster
 * slot's share, a process lease, a global budget, none of which the group covers) is given back.
 * Peeks, refunds and releases reach every layer, one by one. Shadow winners count beside, as ever.
 */

/**
 * One request of a layered decision, as its counters and last steps see it: the one object every
 * layer's evaluation, give-back and finish is handed (the plan's Part), as DecisionService hands its run.
 */
export interface LayerRun extends CounterAsk {
  readonly started: number;
}

/** What the DecisionService lends the layered path: its evaluation steps, decisions and last touches. */
export interface LayerHost {
  readonly random: () => number;
  readonly counters: CounterStore;
  readonly onLayerCompensation?: (policyId: string) => void;
  /** Tests only: the store counts at the decision's clock reading (DecisionTestSeams.clockToStore). */
  readonly clockToStore: boolean;
  keysOf(match: PolicyMatch): string[];
  /** A synchronous store, counting at `nowMs` (undefined: its own clock). */
  evaluateSync(ops: SyncCounterOperations, run: LayerRun, match: PolicyMatch, nowMs: number | undefined): Evaluation;
  evaluate(run: LayerRun, match: PolicyMatch): Evaluation | Promise<Evaluation>;
  /** A group's answer for one operation, as evaluate() would have made it. */
  grouped(run: LayerRun, match: PolicyMatch, answer: CounterResult | Error): Evaluation;
  enforcedDecision(operation: Operation, ctx: RequestContext, evaluation: Evaluation, random: () => number): Decision;
  shadowOnlyDecision(operation: Operation, evaluation: Evaluation): Decision;
  /** The decision no policy made (no_matching_policy). */
  unmatched(): Decision;
  finish(run: LayerRun, decision: Decision, enforced: Evaluation | undefined, shadowed: Evaluation | undefined): Decision;
  /** The clock a synchronous store counts at: the decision's own reading when they share a clock. */
  storeNow(sync: SyncCounterOperations, nowMs: number): number | undefined;
  /** Gives back what a refused plan's operation took: a consume's units (refund) or an acquire's slot (release). */
  giveBack(run: LayerRun, match: PolicyMatch): Evaluation | Promise<Evaluation>;
  /** The same, on a synchronous store. */
  giveBackSync(sync: SyncCounterOperations, run: LayerRun, match: PolicyMatch, nowMs: number | undefined): Evaluation;
}

/** A layer's evaluation and whether its operation took something (a refused plan gives back what did). */
interface Step {
  evaluation: Evaluation;
  committed: boolean;
}

/** One enforcing layer of one request: its winner, and its `sample` draw, made once, before its counter runs. */
interface Entry {
  name: string;
  match: PolicyMatch;
  part: Part;
  draw: number;
  /** What its counter answered, once it has. */
  step?: Step;
}

/** One request of the plan (an Envoy call decides several together): its layers and shadow winners. */
interface Part extends LayerRun {
  /** A reading plan's checks peek instead. */
  call: CounterCall;
  entries: Entry[];
  shadows: PolicyMatch[];
}

interface Plan {
  operation: Operation;
  slotId: string;
  nowMs: number;
  parts: Part[];
  entries: Entry[];
  /** A check one of whose layers can never admit it: every layer is read, none written. */
  reading?: boolean;
}

/** A request's layers, as the matcher gave them; `layers` absent: the one layer of the top level. */
export interface PlannedRequest {
  ctx: RequestContext;
  call: CounterCall;
  started: number;
  layers: readonly LayerMatch[];
}

/** One decision's request and its layers: the operation, lease id and clock reading its plan runs at. */
export interface LayeredRequest extends PlannedRequest, Pick<CounterAsk, 'operation' | 'slotId' | 'nowMs'> {}

/** One decision over the layers of one request. */
export function decideLayers(host: LayerHost, request: LayeredRequest): Decision | Promise<Decision> {
  const plan: Plan = { operation: request.operation, slotId: request.slotId, nowMs: request.nowMs, parts: [], entries: [] };
  addPart(host, plan, request);
  const decided = decidePlan(host, readIfNeverFits(plan));
  return decided instanceof Promise ? decided.then((all) => all[0]) : decided[0];
}

/**
 * Checks of several requests decided together, all or nothing (Envoy's descriptors of one call): when
 * any refuses, none consumes. One decision per request, each over its own layers.
 */
export function decideTogether(host: LayerHost, nowMs: number, requests: readonly PlannedRequest[]): Decision[] | Promise<Decision[]> {
  const plan: Plan = { operation: 'check', slotId: '', nowMs, parts: [], entries: [] };
  for (const request of requests) addPart(host, plan, request);
  return decidePlan(host, readIfNeverFits(plan));
}

/** The plan's part for one request: its enforcing layers (each with its draw) and shadow winners. */
function addPart(host: LayerHost, plan: Plan, request: PlannedRequest): void {
  const { operation, slotId, nowMs } = plan;
  const part: Part = { operation, call: request.call, ctx: request.ctx, slotId, nowMs, started: request.started, entries: [], shadows: [] };
  for (const layer of request.layers) {
    if (layer.enforce !== undefined) {
      const entry: Entry = { name: layer.layer, match: layer.enforce, part, draw: host.random() };
      part.entries.push(entry);
      plan.entries.push(entry);
    }
    if (layer.shadow !== undefined) part.shadows.push(layer.shadow);
  }
  plan.parts.push(part);
}

/** A check one of whose layers can never admit it reads every layer and writes none. */
function readIfNeverFits(plan: Plan): Plan {
  if (plan.operation === 'check' && plan.entries.some((e) => neverFitsMatch(e.match, e.part.ctx))) {
    plan.reading = true;
    for (const part of plan.parts) part.call = readingCheckCall;
  }
  return plan;
}

/** Whether this entry's operation writes, and so goes in the all-or-nothing group. */
function writes(plan: Plan, entry: Entry): boolean {
  return plan.operation === 'acquire' || (plan.operation === 'check' && !plan.reading && entry.part.ctx.quantity > 0);
}

function decidePlan(host: LayerHost, plan: Plan): Decision[] | Promise<Decision[]> {
  const { operation, nowMs } = plan;
  const writing = plan.entries.filter((e) => writes(plan, e));
  const grouping = writing.length > 1;
  const sync = host.counters.sync;
  if (sync !== undefined) {
    const at = host.storeNow(sync, nowMs);
    if (grouping && sync.group) {
      const outcome = sync.group(operationsOf(host, plan, writing), at);
      writing.forEach((e, k) => (e.step = groupStep(host, plan, e, outcome.results[k], outcome.committed[k])));
    }
    for (const e of plan.entries) e.step ??= stepOf(operation, host.evaluateSync(sync, e.part, e.match, at));
    const shadowed = plan.parts.map((part) => (part.shadows.length === 0 ? NO_SHADOWS : part.shadows.map((m) => host.evaluateSync(sync, part, m, at))));
    const decisions = concludeAll(host, plan, shadowed);
    if (grouping && decisions.some((d) => !d.allowed)) {
      // Only a counter named twice can have run in a refused group (its second run refused).
      for (const e of takenBy(host, plan)) host.giveBackSync(sync, e.part, e.match, at);
    }
    return decisions;
  }
  const steps = grouping ? plannedSteps(host, plan, writing) : evaluateAlone(host, plan, plan.entries);
  // Most plans have no shadow winner: then no promise waits for them.
  const shadowing = plan.parts.some((part) => part.shadows.length > 0)
    ? Promise.all(plan.parts.map((part) => Promise.all(part.shadows.map((m) => host.evaluate(part, m)))))
    : undefined;
  return concludeLater(host, plan, grouping, shadowing === undefined ? steps : Promise.all([steps, shadowing]), shadowing);
}

/** Every plan's part without shadow winners shares this (never written). */
const NO_SHADOWS: Evaluation[] = [];

async function concludeLater(host: LayerHost, plan: Plan, grouping: boolean, counted: Promise<unknown>, shadowing: Promise<Evaluation[][]> | undefined): Promise<Decision[]> {
  await counted;
  const shadowed = shadowing === undefined ? plan.parts.map(() => NO_SHADOWS) : await shadowing;
  const decisions = concludeAll(host, plan, shadowed);
  if (grouping && decisions.some((d) => !d.allowed)) await giveBackTaken(host, plan);
  return decisions;
}

/** An operation run alone: it took something when its counter admitted it (a consume counted, a new slot held). */
function stepOf(operation: Operation, evaluation: Evaluation): Step {
  const { result } = evaluation;
  return { evaluation, committed: result !== undefined && result.allowed && !evaluation.waitTimedOut && tookSlot(operation, result) };
}

/** A group's answer for one entry, as sent at the plan's clock reading (a synchronous store's is the same one or its own). */
function groupStep(host: LayerHost, plan: Plan, e: Entry, answer: CounterResult | Error, committed: boolean): Step {
  const taken = committed && !(answer instanceof Error) && tookSlot(plan.operation, answer);
  return { evaluation: host.grouped(e.part, e.match, answer), committed: taken };
}

/**
 * An admitted acquire took a slot unless its slot id held one already (it only refreshed it): releasing
 * that one would free the earlier, admitted acquire's hold. A store that does not tell (no `newSlot`) took one.
 */
function tookSlot(operation: Operation, result: CounterResult): boolean {
  return operation !== 'acquire' || result.newSlot !== false;
}

/** Whether the layer's own action lets a request its counter refused through (its refusal does not refuse the plan). */
function isSoft(e: Entry): boolean {
  if (alwaysRefuses(e.match.compiled.policy.action)) return false;
  return applyLimitAction(e.match.compiled.policy, e.part.ctx, 0, () => e.draw).allowed;
}

function operationsOf(host: LayerHost, plan: Plan, entries: readonly Entry[]): GroupOperation[] {
  return entries.map((e): GroupOperation => {
    const { match } = e;
    const keys = host.keysOf(match);
    const soft = isSoft(e);
    if (plan.operation === 'acquire') return { op: 'acquire', keys, spec: match.compiled.spec as ConcurrencySpec, slotId: plan.slotId, soft };
    const cost = Math.min(e.part.ctx.quantity * (match.compiled.policy.algorithm.cost_per_request ?? 1), 2 ** 53);
    return { op: 'consume', keys, spec: match.compiled.spec as RateSpec, cost, soft };
  });
}

/** The entries' operations, each on its own; their steps set once all have answered. */
function evaluateAlone(host: LayerHost, plan: Plan, entries: readonly Entry[]): Promise<unknown> {
  const evaluating = Promise.all(entries.map((e) => host.evaluate(e.part, e.match)));
  return evaluating.then((evaluations) => entries.forEach((e, k) => (e.step = stepOf(plan.operation, evaluations[k]))));
}

/**
 * A store that has to wait: the writing layers its group covers (plain counters of a store with
 * `group`) go in one group; a layer served by a process lease or a global budget, a store without
 * groups, and every read (a peek) run on their own, beside it.
 */
function plannedSteps(host: LayerHost, plan: Plan, writing: readonly Entry[]): Promise<unknown> {
  const store = host.counters;
  const grouped = store.group === undefined ? [] : writing.filter((e) => e.match.compiled.lease === undefined && e.match.compiled.spec.global === undefined);
  if (grouped.length === 0) return evaluateAlone(host, plan, plan.entries);
  const group = store.group!(operationsOf(host, plan, grouped), host.clockToStore ? plan.nowMs : undefined).then((outcome: GroupOutcome) =>
    grouped.forEach((e, k) => (e.step = groupStep(host, plan, e, outcome.results[k], outcome.committed[k]))),
  );
  // The common plan: every layer in the group, nothing beside it.
  if (grouped.length === plan.entries.length) return group;
  return Promise.all([group, evaluateAlone(host, plan, plan.entries.filter((e) => !grouped.includes(e)))]);
}

/** A refused plan: every writing operation that wrote anyway gives back what it took, each counted. */
async function giveBackTaken(host: LayerHost, plan: Plan): Promise<void> {
  await Promise.all(takenBy(host, plan).map((e) => host.giveBack(e.part, e.match)));
}

/** The writing entries whose operation wrote, each counted as a give-back to come. */
function takenBy(host: LayerHost, plan: Plan): Entry[] {
  const taken = plan.entries.filter((e) => writes(plan, e) && e.step!.committed);
  for (const e of taken) host.onLayerCompensation?.(e.match.compiled.policy.policy_id);
  return taken;
}

function concludeAll(host: LayerHost, plan: Plan, shadowed: Evaluation[][]): Decision[] {
  return plan.parts.map((part, i) => conclude(host, plan, part, shadowed[i]));
}

function conclude(host: LayerHost, plan: Plan, part: Part, shadowed: Evaluation[]): Decision {
  const { operation } = plan;
  const { ctx } = part;
  // The recorder counts one shadow per decision: a limiting one when any layer's shadow limits.
  const recordedShadow = shadowed.find(shadowLimited) ?? shadowed[0];
  if (part.entries.length === 0) {
    const decision = shadowed.length > 0 ? host.shadowOnlyDecision(operation, recordedShadow) : host.unmatched();
    if (shadowed.length > 1) listShadows(decision, shadowed);
    return host.finish(part, decision, undefined, recordedShadow);
  }
  const { entries } = part;
  const decisions = entries.map((e) => host.enforcedDecision(operation, ctx, e.step!.evaluation, () => e.draw));
  const deciding = layeredDecision((i) => entries[i].name, decisions);
  const decision = decisions[deciding];
  const { evaluation } = entries[deciding].step!;
  if (shadowed.length > 0) listShadows(decision, shadowed);
  return host.finish(part, decision, evaluation, recordedShadow);
}

function shadowLimited(evaluation: Evaluation): boolean {
  return evaluation.result !== undefined && !evaluation.result.allowed;
}

/** Every layer's shadow winner, in layer order, in the decision's metadata. */
function listShadows(decision: Decision, shadowed: readonly Evaluation[]): void {
  decision.metadata.shadow_policy_id = shadowed.map((e) => e.match.compiled.policy.policy_id).join(',');
  decision.metadata.shadow_action = shadowed.map(shadowAction).join(',');
}

/** What a shadow policy would have done (metadata.shadow_action). */
export function shadowAction(evaluation: Evaluation): string {
  if (evaluation.failed) return evaluation.match.compiled.policy.failure_mode === 'fail_open' ? 'allow' : 'deny';
  return evaluation.result.allowed ? 'allow' : evaluation.match.compiled.policy.action;
}
