import { ApiError, authHeaders, unauthenticated } from './api.js';
import { LiveSeries } from './series.js';
import type { Hello, Snapshot } from './types.js';

/**
 * GET /rl/v1/stream read with fetch (EventSource cannot send the credential header): `hello` once,
 * then a `snapshot` per server tick. Reconnects after a pause when the stream ends (a draining node
 * ends it on purpose); a 401/403 is reported and not retried.
 */
export class LiveStream {
  /** The per-second series since the server started (its last hour), extended by every snapshot. */
  readonly series = new LiveSeries();
  /** The newest snapshot. */
  latest: Snapshot | undefined;
  hello: Hello | undefined;
  private readonly listeners = new Set<(snapshot: Snapshot) => void>();
  private abort: AbortController | undefined;
  private stopped = false;
  connected = false;

  constructor(private readonly onStatus: (connected: boolean) => void = () => undefined) {}

  /** Resolves with the hello of the first connection, or rejects with its ApiError. */
  start(): Promise<Hello> {
    return new Promise((resolve, reject) => {
      let first = true;
      const connect = async () => {
        if (this.stopped) return;
        try {
          await this.read((hello) => {
            if (first) resolve(hello);
            first = false;
          });
        } catch (error) {
          if (first) {
            first = false;
            return reject(error);
          }
          if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
            // The credential stopped being accepted (revoked key, expired token): back to the login form.
            unauthenticated.dispatchEvent(new Event('logout'));
            return;
          }
        }
        this.setConnected(false);
        if (!this.stopped) setTimeout(connect, 2000);
      };
      void connect();
    });
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
    this.setConnected(false);
  }

  subscribe(listener: (snapshot: Snapshot) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private async read(onHello: (hello: Hello) => void): Promise<void> {
    this.abort = new AbortController();
    const response = await fetch('/rl/v1/stream', { headers: { Accept: 'text/event-stream', ...authHeaders() }, signal: this.abort.signal, cache: 'no-store' });
    if (!response.ok || !response.body) {
      let body: ApiError['body'] = {};
      try {
        body = (await response.json()) as ApiError['body'];
      } catch {
        // not JSON
      }
      throw new ApiError(response.status, body);
    }
    this.setConnected(true);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        this.dispatch(frame, onHello);
      }
    }
  }

  private dispatch(frame: string, onHello: (hello: Hello) => void): void {
    let event = 'message';
    let data = '';
    for (const line of frame.split('\n')) {
      if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data += line.slice(6);
    }
    if (data === '') return;
    if (event === 'hello') {
      const hello = JSON.parse(data) as Hello;
      this.hello = hello;
      // A reconnect brings the server's history: it replaces ours rather than duplicating it.
      this.series.reset(hello.history);
      onHello(hello);
      if (this.latest) this.emit(this.latest);
    } else if (event === 'snapshot') {
      const snapshot = JSON.parse(data) as Snapshot;
      this.latest = snapshot;
      this.series.push(snapshot);
      this.emit(snapshot);
    }
  }

  private emit(snapshot: Snapshot): void {
    for (const listener of this.listeners) listener(snapshot);
  }

  private setConnected(connected: boolean): void {
    this.connected = connected;
    this.onStatus(connected);
  }
}
