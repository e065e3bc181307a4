import { expect } from 'chai';
import Koa from 'koa';
import Router from '@koa/router';
import { conditionalGet, ifNoneMatchMatches, strongEtag } from '../../src/http/conditional-get.js';
import { errorHandler } from '../../src/http/errors.js';
import { responseHeaders } from '../../src/http/headers.js';
import { serve, type TestServer } from '../support/http.js';

describe('conditional GET middleware', () => {
  let server: TestServer;
  let list: unknown[] = [];

  before(async () => {
    const router = new Router();
    router.get('/list', (ctx) => {
      ctx.body = list;
    });
    router.get('/text', (ctx) => {
      ctx.body = 'plain text';
    });
    router.get('/own-etag', (ctx) => {
      ctx.set('ETag', '"7"');
      ctx.body = { version: 7 };
    });
    router.post('/list', (ctx) => {
      ctx.body = list;
    });
    router.get('/missing', (ctx) => {
      ctx.status = 404;
      ctx.body = { error: 'nope', status: 404 };
    });
    const app = new Koa();
    app.silent = true;
    app.use(responseHeaders());
    app.use(errorHandler());
    app.use(conditionalGet());
    app.use(router.routes());
    app.use(router.allowedMethods());
    server = await serve(app);
  });
  after(() => server.close());

  it('sets a strong ETag on a JSON body and answers 304 with no body when it matches', async () => {
    list = [{ policy_id: 'a', version: 1 }];
    const first = await fetch(`${server.url}/list`);
    const etag = first.headers.get('etag')!;
    const text = await first.text();
    expect(first.status).to.equal(200);
    expect(first.headers.get('content-type')).to.match(/^application\/json/);
    expect(JSON.parse(text)).to.deep.equal(list);
    expect(etag).to.equal(strongEtag(text));
    expect(etag).to.match(/^"[A-Za-z0-9_-]{27}"$/);

    const second = await fetch(`${server.url}/list`, { headers: { 'If-None-Match': etag } });
    expect(second.status).to.equal(304);
    expect(await second.text()).to.equal('');
    expect(second.headers.get('etag')).to.equal(etag);
    expect(second.headers.get('x-request-id')).to.be.a('string');
  });

  it('answers 200 with the new body and a new ETag once the body changed', async () => {
    list = [{ policy_id: 'a', version: 1 }];
    const etag = (await fetch(`${server.url}/list`)).headers.get('etag')!;
    list = [{ policy_id: 'a', version: 2 }];
    const response = await fetch(`${server.url}/list`, { headers: { 'If-None-Match': etag } });
    expect(response.status).to.equal(200);
    expect(response.headers.get('etag')).to.not.equal(etag);
    expect(await response.json()).to.deep.equal(list);
  });

  it('matches lists, weak tags and * as RFC 9110 says', () => {
    const tag = '"abc"';
    expect(ifNoneMatchMatches('"x", "abc"', tag)).to.equal(true);
    expect(ifNoneMatchMatches('W/"abc"', tag)).to.equal(true);
    expect(ifNoneMatchMatches('*', tag)).to.equal(true);
    expect(ifNoneMatchMatches('"abcd"', tag)).to.equal(false);
    expect(ifNoneMatchMatches('', tag)).to.equal(false);
    expect(ifNoneMatchMatches('abc', tag)).to.equal(false);
  });

  it('keeps an ETag the route set itself', async () => {
    const first = await fetch(`${server.url}/own-etag`);
    expect(first.headers.get('etag')).to.equal('"7"');
    const second = await fetch(`${server.url}/own-etag`, { headers: { 'If-None-Match': '"7"' } });
    expect(second.status).to.equal(304);
  });

  it('leaves non-GET, non-200 and non-JSON answers alone', async () => {
    list = [1];
    const post = await fetch(`${server.url}/list`, { method: 'POST' });
    expect(post.status).to.equal(200);
    expect(post.headers.get('etag')).to.equal(null);
    const text = await fetch(`${server.url}/text`);
    expect(text.headers.get('etag')).to.equal(null);
    expect(await text.text()).to.equal('plain text');
    const missing = await fetch(`${server.url}/missing`, { headers: { 'If-None-Match': '*' } });
    expect(missing.status).to.equal(404);
    expect(missing.headers.get('etag')).to.equal(null);
  });

  it('answers HEAD with the same ETag and honours If-None-Match on it', async () => {
    list = [{ policy_id: 'h' }];
    const get = await fetch(`${server.url}/list`);
    const etag = get.headers.get('etag')!;
    const head = await fetch(`${server.url}/list`, { method: 'HEAD' });
    expect(head.status).to.equal(200);
    expect(head.headers.get('etag')).to.equal(etag);
    const conditional = await fetch(`${server.url}/list`, { method: 'HEAD', headers: { 'If-None-Match': etag } });
    expect(conditional.status).to.equal(304);
  });
});
