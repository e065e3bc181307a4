/**
 * A child process for the compaction crash tests: opens the store in `dir` with a low compaction
 * threshold, then commits churn changes one by one, writing each acknowledgement to stdout (a
 * synchronous write, so what the parent reads was acknowledged), and SIGKILLs itself the moment
 * compaction number `nth` reaches `step`. Usage: node --import tsx compaction-crash-child.ts DIR STEP NTH FROM
 */
import { writeSync } from 'node:fs';
import { FilePolicyStore, type CompactionStep } from '../../src/policy-store/file-policy-store.js';
import { churn } from './policy-churn.js';

const [dir, step, nth, from] = process.argv.slice(2);
let started = 0;
const store = await FilePolicyStore.open(dir, {
  compactMinBytes: 8 * 1024,
  onCompactionStep: (reached: CompactionStep) => {
    if (reached === 'snapshot-started') started++;
    if (reached === step && started === Number(nth)) process.kill(process.pid, 'SIGKILL');
  },
});
await churn(store, 10_000, (ack) => writeSync(1, `${JSON.stringify(ack)}\n`), 4, Number(from));
// Not reached in a crash test: the store compacts long before 10,000 changes.
await store.close();
