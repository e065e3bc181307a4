/**
 * One `startRedis()` in a process of its own (test/redis/testcontainers-fallback.test.ts): Testcontainers
 * remembers the engine it found and whether Ryuk runs for the life of a process, so each fallback case
 * gets a fresh process. Prints one JSON line: the log lines, and what the Redis it got says it is.
 */
import { command, startRedis } from './redis.js';

const lines: string[] = [];
const redis = await startRedis({ log: (line) => lines.push(line), containerTimeoutMs: 20_000 });
try {
  const ping = await command(redis.host, redis.port, ['PING']);
  const info = String(await command(redis.host, redis.port, ['INFO', 'server']));
  const executable = /executable:(.*)/.exec(info)?.[1]?.trim() ?? '';
  process.stdout.write(`${JSON.stringify({ lines, host: redis.host, ping, executable })}\n`);
} finally {
  await redis.stop();
}
