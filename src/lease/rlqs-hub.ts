import type { Assignment } from './rlqs-assignment.js';
import { RlqsStream, type StreamDeps } from './rlqs-stream.js';

import type { RlqsStatus } from '../schema/server-info.js';

interface OpenStream {
  stream: RlqsStream;
  /** Ends the gRPC call (status OK): Envoy opens its next stream, on a server that stays. */
  endCall: () => void;
}

/** Every RLQS stream of this process: opened by the gRPC adapter, counted for /rl/v1/info and the metrics. */
export class RlqsHub {
  private readonly streams = new Map<RlqsStream, OpenStream>();
  /** Streams' ends under way (their give backs): a drain waits for them. */
  private readonly closing = new Set<Promise<void>>();
  private draining = false;

  constructor(private readonly deps: StreamDeps) {}

  /**
   * A new stream whose assignments go to `send`; `close` it when the gRPC stream ends. `endCall` ends
   * the call from the server's side once a drain has settled the stream.
   */
  open(send: (bucketId: Record<string, string>, assignment: Assignment) => void, endCall: () => void = () => undefined): { stream: RlqsStream; close: (reported: boolean) => Promise<void> } {
    const stream = new RlqsStream(this.deps, send);
    const open = { stream, endCall };
    this.streams.set(stream, open);
    const close = (reported: boolean) => {
      this.streams.delete(stream);
      const ended = stream.end(reported).finally(() => this.closing.delete(ended));
      this.closing.add(ended);
      return ended;
    };
    if (this.draining) void this.drainOne(open);
    return { stream, close };
  }

  /**
   * The server drains (after its shutdown delay, as the gRPC port stops taking calls): every stream is
   * told to stop spending and ended once its reports settled it. Resolves when every stream has ended,
   * settled or cut (at the gRPC server's drain deadline), and its give backs are done: the store may close.
   */
  async drain(): Promise<void> {
    this.draining = true;
    await Promise.all([...this.streams.values()].map((open) => this.drainOne(open)));
    await Promise.all(this.closing);
  }

  private async drainOne(open: OpenStream): Promise<void> {
    await open.stream.drain();
    open.endCall();
  }

  status(): RlqsStatus {
    let buckets = 0;
    let held = 0;
    for (const stream of this.streams.keys()) {
      buckets += stream.bucketCount;
      held += stream.unitsHeld();
    }
    return { streams: this.streams.size, buckets, units_held: held };
  }
}
