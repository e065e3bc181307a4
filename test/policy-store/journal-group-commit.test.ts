import { expect } from 'chai';
import fc from 'fast-check';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FilePolicyStore, JOURNAL_FILE } from '../../src/policy-store/file-policy-store.js';
import type { CommitResult, PolicyChange } from '../../src/policy-store/policy-store.js';
import { createChange, removeChange, updateChange, versionedPolicy } from '../support/policies.js';

/** One change as generated: which policy, what kind, and the head the caller believes it has. */
interface Op {
  id: string;
  kind: 'create' | 'update' | 'remove';
  head: number;
}

function changeOf(op: Op): PolicyChange {
  const version = op.head + 1;
  if (op.kind === 'create') return createChange(versionedPolicy(op.id, version, 10 + version), op.head);
  const old = versionedPolicy(op.id, op.head);
  return op.kind === 'update' ? updateChange(versionedPolicy(op.id, version, 10 + version), old) : removeChange(old);
}

/** What a store holds, in a form two stores can be compared by. */
async function contents(store: FilePolicyStore, ids: string[]): Promise<unknown> {
  const held: Record<string, unknown> = {};
  for (const id of ids) {
    held[id] = {
      head: (await store.fetch(id)).head,
      current: store.get(id)?.version ?? null,
      versions: (await store.versions(id)).map((v) => v.version),
      audit: (await store.audit(id)).map((e) => e.action_type),
    };
  }
  return { revision: store.revision(), held, list: store.list().map((p) => [p.policy_id, p.version]) };
}

/** Counts the writes made to any open file while `run` runs (the journal is the only file written). */
async function countingWrites<T>(dir: string, run: () => Promise<T>): Promise<{ result: T; writes: number }> {
  const probe = await fsp.open(join(dir, 'probe'), 'w');
  const proto = Object.getPrototypeOf(probe) as { write: (...args: unknown[]) => Promise<unknown> };
  await probe.close();
  const original = proto.write;
  let writes = 0;
  proto.write = function (this: unknown, ...args: unknown[]) {
    writes++;
    return original.apply(this, args);
  };
  try {
    return { result: await run(), writes };
  } finally {
    proto.write = original;
  }
}

describe('FilePolicyStore: changes that arrive together are written together (group commit)', function () {
  this.timeout(120_000);
  const dirs: string[] = [];
  const freshDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-group-commit-'));
    dirs.push(dir);
    return dir;
  };
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('answers concurrent changes as if each were committed alone, in order, in fewer writes than changes', async () => {
    const dir = freshDir();
    const store = await FilePolicyStore.open(dir);
    const v1 = versionedPolicy('p', 1);
    const changes: PolicyChange[] = [
      ...Array.from({ length: 40 }, (_, i) => createChange(versionedPolicy(`id-${i}`, 1))),
      createChange(v1),
      createChange(versionedPolicy('p', 1, 99)), // the same id again: a conflict with the one just before it
      updateChange(versionedPolicy('p', 2, 20), v1), // sees the create of this batch
      removeChange(versionedPolicy('p', 2, 20)),
    ];
    const { result: answers, writes } = await countingWrites(dir, () => Promise.all(changes.map((c) => store.commit(c))));
    expect(answers.slice(0, 41)).to.deep.equal(Array.from({ length: 41 }, (_, i) => ({ ok: true, revision: i + 1 })));
    expect(answers[41]).to.deep.equal({ ok: false, reason: 'conflict', head: 1, exists: true });
    expect(answers.slice(42)).to.deep.equal([
      { ok: true, revision: 42 },
      { ok: true, revision: 43 },
    ]);
    expect(writes).to.be.at.least(1).and.below(changes.length);
    // One record per accepted change, revisions following each other.
    const lines = readFileSync(join(dir, JOURNAL_FILE), 'utf8').trim().split('\n');
    expect(lines.map((l) => JSON.parse(l.slice(17)).rev)).to.deep.equal(Array.from({ length: 43 }, (_, i) => i + 1));
    const before = await contents(store, ['p', 'id-0', 'id-39']);
    await store.close();
    const reopened = await FilePolicyStore.open(dir);
    expect(await contents(reopened, ['p', 'id-0', 'id-39'])).to.deep.equal(before);
    await reopened.close();
  });

  it('property: bursts of concurrent changes end as the same changes committed one at a time', async () => {
    const ids = ['a', 'b', 'c'];
    const op = fc.record({ id: fc.constantFrom(...ids), kind: fc.constantFrom('create', 'update', 'remove'), head: fc.nat(3) }) as fc.Arbitrary<Op>;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(op, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 6 }), async (bursts) => {
        const alone = await FilePolicyStore.open(freshDir());
        const together = await FilePolicyStore.open(freshDir());
        try {
          const aloneAnswers: CommitResult[] = [];
          for (const burst of bursts) for (const o of burst) aloneAnswers.push(await alone.commit(changeOf(o)));
          const togetherAnswers: CommitResult[] = [];
          for (const burst of bursts) togetherAnswers.push(...(await Promise.all(burst.map((o) => together.commit(changeOf(o))))));
          expect(togetherAnswers).to.deep.equal(aloneAnswers);
          expect(await contents(together, ids)).to.deep.equal(await contents(alone, ids));
        } finally {
          await alone.close();
          await together.close();
        }
      }),
      { numRuns: 60 },
    );
  });

  it('a closed store refuses every waiting change, and none is written', async () => {
    const dir = freshDir();
    const store = await FilePolicyStore.open(dir);
    const closing = store.close();
    const answers = await Promise.allSettled([store.commit(createChange(versionedPolicy('x', 1))), store.commit(createChange(versionedPolicy('y', 1)))]);
    await closing;
    expect(answers.map((a) => a.status)).to.deep.equal(['rejected', 'rejected']);
    expect(readFileSync(join(dir, JOURNAL_FILE), 'utf8')).to.equal('');
  });
});
