/**
 * What both middleware examples do when run as a program (`npx tsx examples/koa-app.ts`): a client from
 * RL_URL, RL_API_KEY and RL_TIMEOUT_MS, the app on PORT, one JSON line once it listens, and a stop on
 * SIGTERM or SIGINT that closes the server and then the client.
 */
import type { Server } from 'node:http';
import { createClient, type RateLimitClient } from '@rl/client';

export interface ListeningApp {
  listen(port: number, callback: () => void): Server;
}

export function serveExample(name: string, createApp: (client: RateLimitClient) => ListeningApp): void {
  const client = createClient({
    url: process.env.RL_URL ?? 'http://127.0.0.1:8080',
    apiKey: process.env.RL_API_KEY,
    timeoutMs: Number(process.env.RL_TIMEOUT_MS ?? 50),
  });
  const server = createApp(client).listen(Number(process.env.PORT ?? 3000), () => {
    const address = server.address();
    console.log(JSON.stringify({ message: 'listening', app: name, port: typeof address === 'object' && address ? address.port : undefined }));
  });
  const stop = () => server.close(() => void client.close());
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
