import { expect } from 'chai';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { startLinkProxy, type LinkProxy } from './link-proxy.js';

/**
 * The link proxy the fault tests rely on (test/support/link-proxy.ts), against a TCP echo server that
 * counts what it received. Counts and order only, never time.
 */
describe('link proxy (a WAN link with faults)', function () {
  this.timeout(20_000);
  let echo: Server;
  let echoPort: number;
  /** Bytes the echo server received, over all connections. */
  let received = 0;
  let proxy: LinkProxy;
  const clients: Socket[] = [];

  before(async function () {
    echo = createServer((socket) => {
      socket.on('data', (chunk) => {
        received += chunk.length;
        socket.write(chunk);
      });
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    echoPort = (echo.address() as { port: number }).port;
  });

  beforeEach(async function () {
    received = 0;
    proxy = await startLinkProxy({ host: '127.0.0.1', port: echoPort }, 5);
  });

  afterEach(async function () {
    for (const client of clients.splice(0)) client.destroy();
    await proxy.close();
  });

  after(async function () {
    await new Promise<void>((resolve) => echo.close(() => resolve()));
  });

  /** A client through the proxy, with everything it read and the error it met, if any. */
  const connect = async () => {
    const socket = createConnection({ host: '127.0.0.1', port: proxy.port });
    clients.push(socket);
    const state = { socket, data: Buffer.alloc(0), error: undefined as NodeJS.ErrnoException | undefined, closed: false };
    socket.on('data', (chunk: Buffer) => (state.data = Buffer.concat([state.data, chunk])));
    socket.on('error', (error) => (state.error = error));
    socket.on('close', () => (state.closed = true));
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    return state;
  };

  /** Polls until `ok` holds; the guard only stops a hang. */
  const until = async (what: string, ok: () => boolean, guardMs = 10_000) => {
    const deadline = Date.now() + guardMs;
    while (!ok()) {
      if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };

  /** `count` numbered chunks, written one per event-loop turn (so they travel as separate chunks). */
  const writeNumbered = async (socket: Socket, from: number, count: number) => {
    let text = '';
    for (let i = from; i < from + count; i++) {
      const piece = `<${i}>`;
      text += piece;
      socket.write(piece);
      await new Promise((resolve) => setImmediate(resolve));
    }
    return text;
  };

  it('forwards both ways, in order, also when the delay changes mid-stream', async function () {
    proxy.delay(40);
    const client = await connect();
    let sent = await writeNumbered(client.socket, 0, 50);
    proxy.delay(0);
    sent += await writeNumbered(client.socket, 50, 50);
    await until('every byte echoed', () => client.data.length === sent.length);
    expect(client.data.toString()).to.equal(sent);
    expect(proxy.connections()).to.equal(1);
  });

  it('black-holed both ways: bytes are held (none reach the target), then delivered in order after heal', async function () {
    const client = await connect();
    const before = await writeNumbered(client.socket, 0, 10);
    await until('the first bytes echoed', () => client.data.length === before.length);
    proxy.blackHole();
    const held = await writeNumbered(client.socket, 10, 100);
    await until('every byte held', () => proxy.heldBytes() === held.length);
    expect(received).to.equal(before.length);
    expect(client.data.length).to.equal(before.length);
    expect(client.error).to.equal(undefined);

    proxy.heal();
    await until('every byte echoed after heal', () => client.data.length === before.length + held.length);
    expect(client.data.toString()).to.equal(before + held);
    expect(proxy.heldBytes()).to.equal(0);
  });

  it('black-holed one way (replies): requests reach the target, replies wait for heal', async function () {
    const client = await connect();
    proxy.blackHole('to-client');
    const sent = await writeNumbered(client.socket, 0, 20);
    await until('the target received every byte', () => received === sent.length);
    await until('the replies are held', () => proxy.heldBytes() === sent.length);
    expect(client.data.length).to.equal(0);
    proxy.heal();
    await until('the replies arrive', () => client.data.length === sent.length);
    expect(client.data.toString()).to.equal(sent);
  });

  it('black-holed requests: a new connection is accepted, its bytes held too', async function () {
    proxy.blackHole('to-target');
    const client = await connect();
    const sent = await writeNumbered(client.socket, 0, 5);
    await until('held', () => proxy.heldBytes() === sent.length);
    expect(received).to.equal(0);
    proxy.heal();
    await until('echoed', () => client.data.toString() === sent);
  });

  it('reset closes every client with ECONNRESET, drops held bytes, and the link takes new connections', async function () {
    const [a, b] = [await connect(), await connect()];
    proxy.blackHole();
    a.socket.write('lost');
    await until('held', () => proxy.heldBytes() === 4);
    proxy.reset();
    await until('both clients closed', () => a.closed && b.closed);
    expect(a.error?.code).to.equal('ECONNRESET');
    expect(b.error?.code).to.equal('ECONNRESET');
    expect(proxy.resets()).to.equal(2);
    expect(proxy.heldBytes()).to.equal(0);
    expect(received).to.equal(0);

    proxy.heal();
    const c = await connect();
    c.socket.write('after');
    await until('echoed', () => c.data.toString() === 'after');
    expect(proxy.connections()).to.equal(3);
  });

  it('stop refuses connections, start listens again on the same port', async function () {
    const port = proxy.port;
    await proxy.stop();
    const refused = await new Promise<NodeJS.ErrnoException>((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port });
      socket.on('error', resolve);
      socket.on('connect', () => resolve(Object.assign(new Error('connected'), { code: 'CONNECTED' })));
    });
    expect(refused.code).to.equal('ECONNREFUSED');
    await proxy.start();
    expect(proxy.port).to.equal(port);
    const client = await connect();
    client.socket.write('again');
    await until('echoed', () => client.data.toString() === 'again');
  });
});
