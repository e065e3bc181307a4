import { expect } from 'chai';
import type { PolicyChange, PolicyStore } from '../../src/policy-store/policy-store.js';
import { createChange, removeChange, updateChange, versionedPolicy } from './policies.js';

/** One acknowledged change of `churn`: what a later store must still hold. */
export interface ChurnAck {
  policy_id: string;
  version: number;
  audit_id: string;
  revision: number;
  /** The policy's limit at this version; 0 for a delete. */
  limit: number;
}

/**
 * `count` changes over `ids` policies: creates, updates, deletes and re-creates (versions continue
 * after a delete), each committed and acknowledged before the next. `onAck` sees each ack as soon as
 * the store answered it.
 */
export async function churn(store: PolicyStore, count: number, onAck?: (ack: ChurnAck) => void, ids = 4, from = 0): Promise<ChurnAck[]> {
  const acks: ChurnAck[] = [];
  for (let i = from; i < from + count; i++) {
    const id = `churn-${i % ids}`;
    const { policy: current, head } = await store.fetch(id);
    let change: PolicyChange;
    if (!current) change = createChange(versionedPolicy(id, head + 1, i + 1), head);
    else if (i % 7 === 3) change = removeChange(current);
    else change = updateChange(versionedPolicy(id, current.version + 1, i + 1), current);
    const result = await store.commit(change);
    if (!result.ok) throw new Error(`churn change ${i} conflicted: ${JSON.stringify(result)}`);
    const ack: ChurnAck = {
      policy_id: id,
      version: change.audit.version,
      audit_id: change.audit.audit_id,
      revision: result.revision,
      limit: change.policy ? change.policy.algorithm.limit ?? 0 : 0,
    };
    acks.push(ack);
    onAck?.(ack);
  }
  return acks;
}

/**
 * Every acknowledged change is in `store`: its version (with its content) and its audit entry, versions
 * are 1..head without gaps, and the audit trail has one entry per change in order.
 */
export async function expectAcknowledged(store: PolicyStore, acks: readonly ChurnAck[]): Promise<void> {
  for (const id of new Set(acks.map((a) => a.policy_id))) {
    const versions = await store.versions(id);
    const audit = await store.audit(id);
    const { head } = await store.fetch(id);
    expect(versions.map((v) => v.version), id).to.deep.equal(Array.from({ length: versions.length }, (_, k) => k + 1));
    expect(versions.length, id).to.equal(head);
    const auditIds = audit.map((e) => e.audit_id);
    const mine = acks.filter((a) => a.policy_id === id);
    for (const ack of mine) {
      expect(auditIds, `${id} audit of v${ack.version}`).to.include(ack.audit_id);
      if (ack.limit > 0) expect(versions[ack.version - 1].snapshot.algorithm.limit, `${id} v${ack.version}`).to.equal(ack.limit);
    }
    // Acknowledged entries keep their order; at most one unacknowledged (but durable) change follows.
    const positions = mine.map((a) => auditIds.indexOf(a.audit_id));
    expect(positions, id).to.deep.equal([...positions].sort((a, b) => a - b));
    expect(audit.length - 1 - positions[positions.length - 1], id).to.be.at.most(1);
  }
  if (acks.length > 0) expect(store.revision()).to.be.at.least(acks[acks.length - 1].revision);
}
