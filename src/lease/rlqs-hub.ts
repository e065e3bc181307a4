import type { Assignment } from './rlqs-assignment.js';
import { RlqsStream, type StreamDeps } from './rlqs-stream.js';

import type { RlqsStatus } from '../schema/server-info.js';

/** Every RLQS stream of this process: opened by the gRPC adapter, counted for /rl/v1/info and the metrics. */
export class RlqsHub {
  private readonly streams = new Set<RlqsStream>();

  constructor(private readonly deps: StreamDeps) {}

  /** A new stream whose assignments go to `send`; `close` it when the gRPC stream ends. */
  open(send: (bucketId: Record<string, string>, assignment: Assignment) => void): { stream: RlqsStream; close: (reported: boolean) => Promise<void> } {
    const stream = new RlqsStream(this.deps, send);
    this.streams.add(stream);
    const close = (reported: boolean) => {
      this.streams.delete(stream);
      return stream.end(reported);
    };
    return { stream, close };
  }

  status(): RlqsStatus {
    let buckets = 0;
    let held = 0;
    for (const stream of this.streams) {
      buckets += stream.bucketCount;
      held += stream.unitsHeld();
    }
    return { streams: this.streams.size, buckets, units_held: held };
  }
}
