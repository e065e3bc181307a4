import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';

export interface TestServer {
  url: string;
  close(): Promise<void>;
}

/** Serves a Koa app (or any request listener) on 127.0.0.1 with a free port, for fetch-based tests. */
export async function serve(app: Koa | http.RequestListener): Promise<TestServer> {
  const listener = typeof app === 'function' ? app : app.callback();
  const server = http.createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** POSTs JSON and returns status, headers and the parsed body. */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, body: await parseBody(response) };
}

export async function parseBody(response: Response): Promise<any> {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export interface ApiAnswer {
  status: number;
  /** The parsed JSON body; undefined for an empty one. */
  body: any;
}

/** One call of the `/rl/v1` API on `base` with an API key, a JSON body when there is one. */
export async function callApi(base: string, key: string, method: string, path: string, body?: unknown): Promise<ApiAnswer> {
  const response = await fetch(`${base}/rl/v1${path}`, {
    method,
    headers: { 'x-api-key': key, ...(body !== undefined && { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
}
