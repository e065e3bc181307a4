import { expect } from 'chai';
import http from 'node:http';
import { makePolicy } from '../support/policies.js';
import type { TestServer } from '../support/http.js';
import { HTTP_PATHS, serveDecisions } from '../support/http-listeners.js';

const MAX_BODY_BYTES = 1000;

interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any;
}

/** A decision call whose body is streamed in the given pieces (chunked, no Content-Length). */
function postInPieces(url: string, pieces: string[]): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/rl/v1/check`, { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    const writeNext = (i: number) => {
      if (i === pieces.length) return req.end();
      req.write(pieces[i], () => setImmediate(() => writeNext(i + 1)));
    };
    writeNext(0);
  });
}

/** Sends half of a declared body, waits until the server has started reading it, then drops the connection. */
function abortMidBody(url: string): Promise<void> {
  return new Promise<void>((resolve) => {
    const req = http.request(`${url}/rl/v1/check`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': '500' }, agent: false });
    req.on('error', () => undefined);
    req.on('close', () => setTimeout(resolve, 50)); // time for the server to see the abort
    req.write('{"service": "svc"', () => setTimeout(() => req.destroy(), 20));
  });
}

for (const [path, build] of HTTP_PATHS) {
  describe(`HTTP decision calls with streamed bodies (${path})`, () => {
    let server: TestServer;

    beforeEach(async () => {
      const policies = [makePolicy({ policy_id: 'fw', scope: { service: 'svc' }, algorithm: { type: 'fixed_window', limit: 5, window: '1m' } })];
      server = await serveDecisions(build, policies, MAX_BODY_BYTES);
    });
    afterEach(() => server.close());

    it('decides on a body that arrives in several pieces without a Content-Length', async () => {
      const answer = await postInPieces(server.url, ['{"serv', 'ice": "svc", ', '"user_id": "u"}']);
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.include({ allowed: true, matched_policy_id: 'fw', remaining: 4 });
    });

    it('answers 413 and closes the connection when an undeclared body outgrows the limit', async () => {
      const answer = await postInPieces(server.url, ['{"user_id": "', 'x'.repeat(600), 'x'.repeat(600), '"}']);
      expect(answer.status).to.equal(413);
      expect(answer.headers.connection).to.equal('close');
      expect(answer.body.error).to.contain('RL_MAX_BODY_BYTES');
      expect(answer.headers['x-request-id']).to.be.a('string');
    });

    it('survives a caller that goes away in the middle of a body, logs no error, and keeps answering', async () => {
      const written: string[] = [];
      const stderrWrite = process.stderr.write;
      process.stderr.write = ((chunk: unknown) => written.push(String(chunk)) > 0) as typeof process.stderr.write;
      try {
        await abortMidBody(server.url);
      } finally {
        process.stderr.write = stderrWrite;
      }
      expect(written.join(''), 'a caller going away is not a bug of the service').to.not.contain('"level":"error"');
      const after = await postInPieces(server.url, ['{"service": "svc"}']);
      expect(after.status).to.equal(200);
      expect(after.body).to.deep.include({ allowed: true, remaining: 4 });
    });
  });
}
