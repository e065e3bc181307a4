import type { Cluster, Redis } from 'ioredis';
import { RlError } from '../errors.js';
import { isNoScript, type LuaScript } from '../redis/lua-scripts.js';

/**
 * Durability of a policy change in Redis (redis-policy-store.ts, "Durability"): when the primary holding
 * the policy keys has a replica, the commit script and `WAIT 1 <ackTimeoutMs>` go out together, and a
 * change no replica confirmed in time is answered `unavailable`.
 */
export class ReplicaAck {
  constructor(
    private readonly client: Redis | Cluster,
    /** A key of the policy slot: a read of it leads a pipeline to that slot's primary. */
    private readonly metaKey: string,
    private readonly ackTimeoutMs: number,
  ) {}

  /** Whether the primary holding the policy keys has a replica a change should wait for. */
  async present(): Promise<boolean> {
    // A keyed read leads the pipeline to the primary of the policy slot; the second command asks it.
    const asked = this.client.pipeline().hget(this.metaKey, 'revision');
    const [, [error, reply]] = pipelineResults(await (this.client.isCluster ? asked.call('CLUSTER', 'NODES') : asked.info('replication')).exec());
    if (error) throw error;
    if (this.client.isCluster) return clusterReplicaCount(String(reply)) > 0;
    return Number(/^connected_slaves:(\d+)/m.exec(String(reply))?.[1] ?? 0) > 0;
  }

  /**
   * The commit script, then WAIT for one replica, in one pipeline: the same connection, so WAIT covers
   * this write. EVALSHA, and the whole pipeline again with the script's text after NOSCRIPT (nothing
   * ran): the defined command's own resend would go out alone, after the WAIT.
   */
  async commit(script: LuaScript, keysAndArgs: string[]): Promise<unknown> {
    const [[commitError, reply], [waitError, acknowledged]] = await this.commitThenWait(script, keysAndArgs, false);
    if (commitError) throw commitError;
    if (waitError) throw waitError;
    if (Number(acknowledged) < 1 && Number((reply as number[])[0]) === 1) {
      throw new RlError(
        'unavailable',
        `policy store: the change was saved on the Redis primary but no replica confirmed it within ${this.ackTimeoutMs} ms, ` +
          'so a failover could still lose it; read the policy back before retrying',
      );
    }
    return reply;
  }

  private async commitThenWait(script: LuaScript, keysAndArgs: string[], resend: boolean): Promise<[Error | null, unknown][]> {
    const pipeline = this.client.pipeline();
    if (resend) pipeline.eval(script.lua, script.numberOfKeys, ...keysAndArgs);
    else pipeline.evalsha(script.sha1, script.numberOfKeys, ...keysAndArgs);
    const results = pipelineResults(await pipeline.call('WAIT', '1', String(this.ackTimeoutMs)).exec());
    return !resend && isNoScript(results[0][0]) ? this.commitThenWait(script, keysAndArgs, true) : results;
  }
}

/**
 * Replicas of the node answering CLUSTER NODES that are not marked failed: connected or not, each could
 * be promoted in a failover (the cluster's own view; CLUSTER SLOTS omits replicas until they have
 * replicated something, and a client's slot map is only as fresh as its last refresh).
 */
export function clusterReplicaCount(nodes: string): number {
  const lines = nodes.split('\n').map((line) => line.split(' '));
  const myself = lines.find((fields) => fields[2]?.split(',').includes('myself'));
  if (!myself) return 0;
  return lines.filter((fields) => fields[3] === myself[0] && !fields[2].split(',').includes('fail')).length;
}

/** A pipeline's [error, reply] pairs (exec() answers null only for a discarded MULTI, never used here). */
function pipelineResults(results: [Error | null, unknown][] | null): [Error | null, unknown][] {
  if (!results) throw new Error('Redis discarded the pipeline');
  return results;
}
