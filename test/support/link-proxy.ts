/**
 * A TCP proxy standing for a WAN link (the global store seen from a region), with faults on demand, per
 * direction or both: `delay` (every byte arrives that much later), `blackHole` (bytes are held, as on a
 * partitioned link: nothing arrives and nothing fails until `heal` delivers them, late and in order),
 * `reset` (every open connection is closed with a TCP RST: its clients see ECONNRESET and reconnect),
 * `stop`/`start` (the link down: connections cut and new ones refused, then listened for again on the
 * same port). `heal` restores the delay the proxy started with and releases what a black-hole held.
 *
 * Bytes keep their order in each direction whatever the faults: a chunk is never delivered before one
 * that arrived earlier, so a delay shortened mid-flight does not reorder a stream.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

/** `to-target`: from the clients to the target (requests); `to-client`: back (replies). */
export type LinkDirection = 'to-target' | 'to-client' | 'both';

export interface LinkProxy {
  port: number;
  /** `redis://127.0.0.1:<port>` */
  url: string;
  /** Connections accepted so far. */
  connections(): number;
  /** Connections resets closed so far. */
  resets(): number;
  /** Bytes held by black-holes now (in either direction). */
  heldBytes(): number;
  /** Every byte arrives `ms` later (from now on; bytes on their way keep their order). */
  delay(ms: number, direction?: LinkDirection): void;
  /** Holds every byte (nothing is lost, nothing arrives) until `heal`. */
  blackHole(direction?: LinkDirection): void;
  /** Closes every open connection with a TCP RST (bytes held or on their way are dropped). */
  reset(): void;
  /** Back to the starting delay in both directions; held bytes are delivered, in order. */
  heal(): void;
  /** Cuts every connection and stops listening. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** One direction's state: its delay and whether it holds bytes. Shared by every connection's pipe. */
interface DirectionState {
  delayMs: number;
  held: boolean;
}

/** One direction of one connection: chunks waiting for their time (or for a heal), in arrival order. */
class Pipe {
  private readonly queue: { chunk: Buffer; due: number }[] = [];
  private lastDue = 0;
  private timer: NodeJS.Timeout | undefined;
  private ended = false;

  constructor(
    private readonly to: Socket,
    private readonly state: DirectionState,
  ) {}

  bytesHeld(): number {
    return this.state.held ? this.queue.reduce((n, q) => n + q.chunk.length, 0) : 0;
  }

  push(chunk: Buffer): void {
    this.lastDue = Math.max(this.lastDue, performance.now() + this.state.delayMs);
    this.queue.push({ chunk, due: this.lastDue });
    this.pump();
  }

  /** The sender closed: end the other side once every byte before the close went through. */
  end(): void {
    this.ended = true;
    this.pump();
  }

  /** Delivers what is due, unless held; re-arms for the next chunk. */
  pump(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.state.held || this.to.destroyed) return;
    const now = performance.now();
    while (this.queue.length > 0 && this.queue[0].due <= now) this.to.write(this.queue.shift()!.chunk);
    if (this.queue.length > 0) {
      this.timer = setTimeout(() => this.pump(), Math.max(1, this.queue[0].due - now));
      this.timer.unref();
    } else if (this.ended) this.to.end();
  }

  /** On heal: everything held is due now. */
  release(): void {
    const now = performance.now();
    for (const q of this.queue) q.due = Math.min(q.due, now);
    this.lastDue = Math.min(this.lastDue, now);
    this.pump();
  }

  drop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.queue.length = 0;
  }
}

interface Link {
  client: Socket;
  upstream: Socket;
  pipes: Pipe[];
}

export async function startLinkProxy(target: { host: string; port: number }, delayMs = 0): Promise<LinkProxy> {
  const states: Record<'to-target' | 'to-client', DirectionState> = {
    'to-target': { delayMs, held: false },
    'to-client': { delayMs, held: false },
  };
  const links = new Set<Link>();
  let accepted = 0;
  let resets = 0;
  let server: Server | undefined;
  let port = 0;

  const directions = (direction: LinkDirection) => (direction === 'both' ? (['to-target', 'to-client'] as const) : ([direction] as const));
  const pipes = () => [...links].flatMap((link) => link.pipes);

  const connect = (client: Socket) => {
    accepted++;
    const upstream = createConnection(target);
    const link: Link = { client, upstream, pipes: [new Pipe(upstream, states['to-target']), new Pipe(client, states['to-client'])] };
    links.add(link);
    const [up, down] = link.pipes;
    for (const socket of [client, upstream]) {
      socket.setNoDelay(true);
      // A closed or reset side takes the other with it (as a broken link would).
      socket.on('error', () => cut(link));
      socket.on('close', () => cut(link));
    }
    client.on('data', (chunk: Buffer) => up.push(chunk));
    upstream.on('data', (chunk: Buffer) => down.push(chunk));
    client.on('end', () => up.end());
    upstream.on('end', () => down.end());
  };

  /** Forgets a link whose socket closed; the other socket closes once its bytes went through (Pipe.end), or now on error. */
  const cut = (link: Link) => {
    if (!links.has(link)) return;
    if (link.client.destroyed || link.upstream.destroyed) {
      links.delete(link);
      for (const pipe of link.pipes) pipe.drop();
      link.client.destroy();
      link.upstream.destroy();
    }
  };

  const resetAll = () => {
    for (const link of [...links]) {
      links.delete(link);
      for (const pipe of link.pipes) pipe.drop();
      resets++;
      for (const socket of [link.client, link.upstream]) {
        if (socket.destroyed) continue;
        // resetAndDestroy needs a connected socket; one still connecting is simply destroyed.
        if (socket.readyState === 'open') socket.resetAndDestroy();
        else socket.destroy();
      }
    }
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer(connect);
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => {
        port = (s.address() as { port: number }).port;
        server = s;
        resolve();
      });
    });

  const stop = async () => {
    const s = server;
    server = undefined;
    for (const link of [...links]) {
      links.delete(link);
      for (const pipe of link.pipes) pipe.drop();
      link.client.destroy();
      link.upstream.destroy();
    }
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };

  await listen();
  return {
    port,
    get url() {
      return `redis://127.0.0.1:${port}`;
    },
    connections: () => accepted,
    resets: () => resets,
    heldBytes: () => pipes().reduce((n, pipe) => n + pipe.bytesHeld(), 0),
    delay(ms, direction = 'both') {
      for (const d of directions(direction)) states[d].delayMs = ms;
    },
    blackHole(direction = 'both') {
      for (const d of directions(direction)) states[d].held = true;
    },
    reset: resetAll,
    heal() {
      for (const state of Object.values(states)) {
        state.delayMs = delayMs;
        state.held = false;
      }
      for (const pipe of pipes()) pipe.release();
    },
    stop,
    start: () => (server ? Promise.resolve() : listen()),
    close: stop,
  };
}
