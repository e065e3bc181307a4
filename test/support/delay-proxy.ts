/**
 * A TCP proxy that adds a fixed delay each way, standing in for a WAN link (the global store seen
 * from a region). Bytes keep their order and pacing; each chunk is forwarded `delayMs` after it
 * arrived. `stop()` cuts every connection and refuses new ones (the link is down); `start()` listens
 * again on the same port, so clients reconnect by themselves.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface DelayProxy {
  port: number;
  /** `redis://127.0.0.1:<port>` */
  url: string;
  /** Connections accepted so far. */
  connections(): number;
  /** Cuts every connection and stops listening. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function startDelayProxy(target: { host: string; port: number }, delayMs: number): Promise<DelayProxy> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let server: Server | undefined;
  let port = 0;

  const forward = (from: Socket, to: Socket) => {
    from.on('data', (chunk: Buffer) => {
      const timer = setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, delayMs);
      timer.unref();
    });
    from.on('close', () => setTimeout(() => to.destroy(), delayMs).unref());
    from.on('error', () => to.destroy());
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((client) => {
        accepted++;
        const upstream = createConnection(target);
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.setNoDelay(true);
          socket.on('close', () => sockets.delete(socket));
        }
        forward(client, upstream);
        forward(upstream, client);
      });
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
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };

  await listen();
  return {
    port,
    get url() {
      return `redis://127.0.0.1:${port}`;
    },
    connections: () => accepted,
    stop,
    start: () => (server ? Promise.resolve() : listen()),
    close: stop,
  };
}
