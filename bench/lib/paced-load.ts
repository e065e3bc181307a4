import net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { HttpLoadResult } from './http-load.js';
import { Samples, cpuPercentSince } from './stats.js';

/**
 * An open-loop, evenly paced HTTP/1.1 load: `rate` requests per second, released on a 1 ms timer (each
 * tick sends the requests that have come due), over `connections` keep-alive sockets, for
 * `durationSec`. Requests go out whether or not earlier ones have been answered (open loop); a request
 * that finds every socket busy waits in a queue, and that wait counts in its latency, which runs from
 * the tick that released it to the last byte of its answer. The timer's own lag (up to ~1 ms between
 * when a request was due and when a tick released it) is not counted; it is reported apart.
 *
 * Why not autocannon's `overallRate`: autocannon lets each connection send its per-second quota as fast as
 * it can and then pause until the next second, so "half the maximum rate" is full load for half of every
 * second and its p99 is the p99 of a saturated server. Why not node:http's client: at several thousand
 * requests per second its own cost (~60 µs a request) stalls this process's event loop and the stalls
 * show up as server latency. This client writes pre-built requests to raw sockets and reads only the
 * status line and Content-Length of each answer (the servers measured here answer with Content-Length).
 */

export interface PacedLoadOptions {
  port: number;
  path: string;
  bodies: string[];
  rate: number;
  connections: number;
  durationSec: number;
  /** Also report the slowest answer of every 250 ms slice of the run (by send time). */
  timeline?: boolean;
}

/** An autocannon run's fields (here over the whole paced run, drain included), and the pacing's own. */
export interface PacedLoadResult extends HttpLoadResult {
  /** Requests not answered when the run ended (they count as neither answer nor error). */
  unfinished: number;
  /** p99 of how late the timer released a request after it was due. */
  send_lag_p99_ms: number;
  /** The load generator's own event-loop stalls: a stall delays reading answers and inflates latency. */
  loadgen_loop_delay_p99_ms: number;
  loadgen_loop_delay_max_ms: number;
  /** With `timeline`: the slowest answer (ms) among the requests sent in each 250 ms slice. */
  timeline_max_ms?: number[];
}

interface Conn {
  socket: net.Socket;
  busy: boolean;
  closed: boolean;
  startedAt: number;
  buffer: Buffer;
}

const HEADER_END = Buffer.from('\r\n\r\n');

export async function pacedHttpLoad(options: PacedLoadOptions): Promise<PacedLoadResult> {
  const requests = options.bodies.map((body) =>
    Buffer.from(
      `POST ${options.path} HTTP/1.1\r\nHost: 127.0.0.1:${options.port}\r\nConnection: keep-alive\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    ),
  );
  const total = Math.floor(options.rate * options.durationSec);
  const samples = new Samples(total + 16);
  const lag = new Samples(total + 16);
  const timeline = options.timeline ? new Array<number>(Math.ceil(options.durationSec * 4) + 1).fill(0) : undefined;
  let released = 0;
  let ok = 0;
  let non2xx = 0;
  let errors = 0;
  let answered = 0;
  const queue: number[] = []; // release times of requests waiting for a free socket
  const idle: Conn[] = [];
  let started = 0;

  const record = (releasedAt: number, status: number) => {
    answered++;
    if (status >= 200 && status < 300) {
      ok++;
      const latency = performance.now() - releasedAt;
      samples.add(latency);
      if (timeline) {
        const slot = Math.min(timeline.length - 1, Math.floor((releasedAt - started) / 250));
        timeline[slot] = Math.max(timeline[slot], latency);
      }
    } else non2xx++;
  };
  const send = (conn: Conn, releasedAt: number) => {
    conn.busy = true;
    conn.startedAt = releasedAt;
    conn.socket.write(requests[(released + answered) % requests.length]);
  };
  const next = (conn: Conn) => {
    const waiting = queue.shift();
    if (waiting !== undefined) send(conn, waiting);
    else {
      conn.busy = false;
      // Back of the line: sockets are used in turn, so none sits idle long enough for the server's
      // keep-alive timeout to close it.
      if (!conn.closed) idle.push(conn);
    }
  };

  const conns = await Promise.all(
    Array.from(
      { length: options.connections },
      () =>
        new Promise<Conn>((resolve, reject) => {
          const socket = net.connect({ host: '127.0.0.1', port: options.port, noDelay: true });
          const conn: Conn = { socket, busy: false, closed: false, startedAt: 0, buffer: Buffer.alloc(0) };
          socket.once('connect', () => resolve(conn));
          socket.once('error', reject);
        }),
    ),
  );
  for (const conn of conns) {
    conn.socket.removeAllListeners('error');
    conn.socket.on('error', () => {});
    // A socket the server closed (or that failed) is out of the pool; a request on it is an error.
    conn.socket.on('close', () => {
      conn.closed = true;
      const at = idle.indexOf(conn);
      if (at >= 0) idle.splice(at, 1);
      if (conn.busy) {
        errors++;
        answered++;
        conn.busy = false;
      }
    });
    conn.socket.on('data', (chunk: Buffer) => {
      conn.buffer = conn.buffer.length === 0 ? chunk : Buffer.concat([conn.buffer, chunk]);
      for (;;) {
        const end = conn.buffer.indexOf(HEADER_END);
        if (end < 0) return;
        const head = conn.buffer.toString('latin1', 0, end);
        const declared = /\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1];
        if (declared === undefined) {
          // Not an answer this reader understands (chunked, say): count it as an error, drop the socket.
          errors++;
          answered++;
          conn.socket.destroy();
          return;
        }
        const length = Number(declared);
        const size = end + 4 + length;
        if (conn.buffer.length < size) return;
        const status = Number(head.slice(9, 12));
        conn.buffer = conn.buffer.subarray(size);
        const releasedAt = conn.startedAt;
        record(releasedAt, status);
        conn.busy = false;
        next(conn);
      }
    });
    idle.push(conn);
  }

  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  const cpuBefore = process.cpuUsage();
  started = performance.now();
  const intervalMs = 1000 / options.rate;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const now = performance.now();
      while (released < total && started + released * intervalMs <= now) {
        lag.add(now - (started + released * intervalMs));
        released++;
        const conn = idle.shift();
        if (conn) send(conn, now);
        else queue.push(now);
      }
      if (released >= total) {
        clearInterval(timer);
        resolve();
      }
    }, 1);
  });
  // Let the last requests finish (bounded).
  const drainUntil = performance.now() + 2_000;
  while (answered < released && performance.now() < drainUntil) await new Promise((r) => setTimeout(r, 5));
  const wallMs = performance.now() - started;
  const loadgenCpuPct = cpuPercentSince(cpuBefore, wallMs);
  loopDelay.disable();
  for (const conn of conns) conn.socket.destroy();
  return {
    ...samples.summary(),
    throughput_rps: ok / (wallMs / 1000),
    requests: ok,
    non2xx,
    errors,
    unfinished: released - answered,
    duration_s: wallMs / 1000,
    loadgen_cpu_pct: loadgenCpuPct,
    send_lag_p99_ms: lag.summary().p99_ms,
    loadgen_loop_delay_p99_ms: loopDelay.percentile(99) / 1e6,
    loadgen_loop_delay_max_ms: loopDelay.max / 1e6,
    ...(timeline ? { timeline_max_ms: timeline.map((v) => Math.round(v * 10) / 10) } : {}),
  };
}
