import http from 'node:http';
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { expect } from 'chai';
import { InvalidationNotifier, type InvalidationFailure } from '../../src/invalidation/notifier.js';
import { setLogLevel } from '../../src/util/log.js';

interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: any;
  at: number;
}

interface Target {
  url: string;
  received: Received[];
  /** Requests that went away before they were answered (the client aborted them). */
  aborted(): number;
  close(): Promise<void>;
}

/** A target whose answer is chosen per request; `hang` never answers. */
async function target(answer: (req: http.IncomingMessage, res: http.ServerResponse) => unknown): Promise<Target> {
  const received: Received[] = [];
  let aborted = 0;
  const server = http.createServer((req, res) => {
    res.on('close', () => {
      if (!res.writableFinished) aborted++;
    });
    let text = '';
    req.on('data', (chunk) => (text += chunk));
    req.on('end', () => {
      received.push({ path: req.url ?? '', headers: req.headers, body: text ? JSON.parse(text) : undefined, at: Date.now() });
      answer(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    aborted: () => aborted,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const accept = () => target((_req, res) => res.writeHead(202, { 'content-type': 'application/json' }).end('{"accepted":true}'));
const hang = () => target(() => 'hang');

/** A URL on which nothing listens (connection refused). */
async function refusingUrl(): Promise<string> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

const change = (version = 1) => ({ policy_id: 'p1', change: 'updated', version });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check`; the deadline only turns a hang into a clear failure, it is no claim about speed. */
async function eventually(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(10);
  }
}

describe('InvalidationNotifier', () => {
  const cleanup: (() => Promise<void>)[] = [];
  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));
  afterEach(async () => {
    for (const fn of cleanup.splice(0)) await fn();
  });

  function notifier(options: ConstructorParameters<typeof InvalidationNotifier>[0]): InvalidationNotifier {
    const n = new InvalidationNotifier(options);
    cleanup.unshift(() => n.close());
    return n;
  }
  async function make(t: Promise<Target>): Promise<Target> {
    const made = await t;
    cleanup.push(() => made.close());
    return made;
  }

  it('POSTs the change to {target}/rl/v1/agent/invalidate with the bearer token', async () => {
    const good = await make(accept());
    const delivered: string[] = [];
    const n = notifier({ targets: [good.url + '/'], token: 's3cret', onDelivered: (t) => delivered.push(t) });
    n.notify(change(3));
    await n.idle();
    expect(good.received).to.have.length(1);
    expect(good.received[0].path).to.equal('/rl/v1/agent/invalidate');
    expect(good.received[0].body).to.deep.equal({ policy_id: 'p1', change: 'updated', version: 3 });
    expect(good.received[0].headers.authorization).to.equal('Bearer s3cret');
    expect(good.received[0].headers['content-type']).to.equal('application/json');
    expect(delivered).to.deep.equal([good.url]);
    expect(n.stats()).to.include({ delivered: 1, failed: 0, pending: 0, inFlight: 0 });
  });

  it('never delays notify(): hanging and refusing targets cost the caller nothing', async () => {
    const hung = await make(hang());
    const refused = await refusingUrl();
    const good = await make(accept());
    const n = notifier({ targets: [hung.url, refused, good.url], timeoutMs: 300, maxAttempts: 2, baseDelayMs: 10 });
    for (let i = 1; i <= 200; i++) n.notify(change(i));
    // notify() only records work: when the 200 calls have returned no target has received anything
    // (delivery runs later, on the event loop), one request per target has been started and every
    // later change was merged into one waiting follow-up per target: no work per call beyond that.
    expect(hung.received.length + good.received.length).to.equal(0);
    expect(n.stats()).to.include({ attempts: 3, inFlight: 3, pending: 3, coalesced: 3 * 198, delivered: 0, failed: 0 });
    // The good target is still served while the hung one holds a worker.
    await eventually(() => good.received.length > 0);
    expect(good.received.at(-1)!.body.version).to.be.at.most(200);
  });

  it('holds at most one request per target: a hung target never starves the others', async () => {
    const hung = await make(hang());
    const good = await make(accept());
    const n = notifier({ targets: [hung.url, good.url], concurrency: 2, timeoutMs: 10_000 });
    for (let version = 1; version <= 5; version++) {
      n.notify(change(version));
      await eventually(() => good.received.some((r) => r.body.version === version));
    }
    // The good target has the fifth change once it received it; its answer may still be on the way back.
    await eventually(() => n.stats().delivered === 5);
    expect(hung.received).to.have.length(1);
    expect(n.stats()).to.include({ delivered: 5, inFlight: 1, pending: 1 });
  });

  it('never throws, even for odd input or after close()', async () => {
    const n = notifier({ targets: [await refusingUrl()], maxAttempts: 1 });
    expect(() => n.notify({ policy_id: undefined as unknown as string, change: 'x', version: NaN })).to.not.throw();
    await n.close();
    expect(() => n.notify(change())).to.not.throw();
  });

  it('retries with exponential back-off, then reports one failure', async () => {
    const failing = await make(target((_req, res) => res.writeHead(503).end()));
    const failures: InvalidationFailure[] = [];
    const retries: [attempts: number, delayMs: number][] = [];
    const n = notifier({
      targets: [failing.url],
      maxAttempts: 4,
      baseDelayMs: 40,
      random: () => 1, // no jitter: delays of exactly 40, 80, 160 ms
      onFailure: (f) => failures.push(f),
      onRetry: (_target, attempts, delayMs) => retries.push([attempts, delayMs]),
    });
    n.notify(change());
    await eventually(() => failures.length > 0);
    expect(failing.received).to.have.length(4);
    // The schedule, as the notifier set it: doubling from the base after each failed attempt.
    expect(retries).to.deep.equal([
      [1, 40],
      [2, 80],
      [3, 160],
    ]);
    // And it was kept: a retry cannot leave before its delay (lower bounds only, with 10 ms of clock
    // slack; how much later it left depends on the machine's load and proves nothing).
    const gaps = failing.received.slice(1).map((r, i) => r.at - failing.received[i].at);
    expect(gaps[0]).to.be.at.least(30);
    expect(gaps[1]).to.be.at.least(70);
    expect(gaps[2]).to.be.at.least(150);
    expect(failures).to.have.length(1);
    expect(failures[0]).to.deep.include({ target: failing.url, reason: 'exhausted', attempts: 4, error: 'HTTP 503' });
    expect(n.stats()).to.include({ failed: 1, attempts: 4, delivered: 0 });
  });

  it('counts a refused connection and a timeout as failures after the bounded attempts', async () => {
    const hung = await make(hang());
    const refused = await refusingUrl();
    const failures: InvalidationFailure[] = [];
    const n = notifier({ targets: [hung.url, refused], maxAttempts: 2, baseDelayMs: 10, timeoutMs: 150, onFailure: (f) => failures.push(f) });
    n.notify(change());
    await eventually(() => failures.length === 2);
    const byTarget = Object.fromEntries(failures.map((f) => [f.target, f]));
    expect(byTarget[refused]).to.deep.include({ reason: 'exhausted', error: 'ECONNREFUSED', attempts: 2 });
    // Each attempt on the hung target ended by its own 150 ms timeout, not by an answer.
    expect(byTarget[hung.url]).to.deep.include({ reason: 'exhausted', error: 'timeout', attempts: 2 });
    expect(hung.received).to.have.length(2);
  });

  it('a request to a hung target still times out after a garbage collection (its timeout signal is held)', async () => {
    // AbortSignal.any() holds its sources weakly (nodejs/node#57736): collected, the timeout would never fire.
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const hung = await make(hang());
    const failures: InvalidationFailure[] = [];
    const n = notifier({ targets: [hung.url], maxAttempts: 1, timeoutMs: 200, onFailure: (f) => failures.push(f) });
    n.notify(change());
    await eventually(() => hung.received.length === 1);
    gc();
    await eventually(() => failures.length === 1);
    expect(failures[0]).to.deep.include({ reason: 'exhausted', error: 'timeout', attempts: 1 });
  });

  it('coalesces a burst: one request in flight, one merged follow-up carrying the latest change', async () => {
    const slow = await make(target((_req, res) => void setTimeout(() => res.writeHead(202).end(), 100)));
    const n = notifier({ targets: [slow.url], concurrency: 1 });
    for (let i = 1; i <= 50; i++) n.notify(change(i));
    expect(n.stats().pending + n.stats().inFlight).to.be.at.most(2);
    await n.idle();
    expect(slow.received.map((r) => r.body.version)).to.deep.equal([1, 50]);
    expect(n.stats()).to.include({ delivered: 2, coalesced: 48, failed: 0 });
  });

  it('keeps the queue bounded: beyond maxQueue the oldest waiting notification is dropped and counted', async () => {
    const hung = await Promise.all([1, 2, 3, 4, 5, 6].map(() => make(hang())));
    const failures: InvalidationFailure[] = [];
    const n = notifier({ targets: hung.map((t) => t.url), concurrency: 1, maxQueue: 2, timeoutMs: 5000, onFailure: (f) => failures.push(f) });
    n.notify(change());
    n.notify(change(2));
    const stats = n.stats();
    expect(stats.pending).to.be.at.most(2);
    expect(stats.inFlight).to.be.at.most(1);
    expect(stats.dropped).to.be.at.least(3);
    expect(failures.every((f) => f.reason === 'dropped')).to.equal(true);
    expect(failures.length).to.equal(stats.dropped);
  });

  it('never follows a redirect: a 302 is a failure and the other server gets nothing', async () => {
    const elsewhere = await make(accept());
    const redirecting = await make(
      target((_req, res) => res.writeHead(302, { location: `${elsewhere.url}/rl/v1/agent/invalidate` }).end()),
    );
    const failures: InvalidationFailure[] = [];
    const n = notifier({ targets: [redirecting.url], token: 'secret', onFailure: (f) => failures.push(f) });
    n.notify(change());
    await eventually(() => failures.length === 1);
    await sleep(100);
    expect(redirecting.received).to.have.length(1);
    expect(elsewhere.received).to.have.length(0);
    expect(failures[0]).to.deep.include({ reason: 'exhausted', attempts: 1, error: 'HTTP 302' });
  });

  it('close() aborts requests in flight at once (it does not wait for their timeout)', async () => {
    const hung = await make(hang());
    // An hour-long timeout and a target that never answers: only an abort can settle the request.
    const n = notifier({ targets: [hung.url], timeoutMs: 3_600_000 });
    n.notify(change());
    await eventually(() => hung.received.length === 1);
    expect(n.stats()).to.include({ inFlight: 1 });
    await n.close();
    expect(n.stats()).to.include({ pending: 0, inFlight: 0 });
    // The target saw its request go away unanswered: the notifier aborted it.
    await eventually(() => hung.aborted() === 1);
    expect(hung.received).to.have.length(1);
  });
});
