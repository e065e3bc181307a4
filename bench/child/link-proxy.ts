import { startLinkProxy, type LinkDirection } from '../../test/support/link-proxy.js';
import { argOf, childMain, send } from './common.js';

/**
 * A region's WAN link to the global store (scenarios 13 and 14): the link proxy of the tests in a
 * process of its own, so its timers are not delayed by the load generator's. `--port <redis port>
 * --delay-ms <n>`; answers `{type: 'ready', port}`. Faults on request: `{type: 'link', fault: 'delay',
 * ms, direction?}`, `{type: 'link', fault: 'black-hole' | 'reset' | 'heal', direction?}`, each answered
 * `{type: 'link-done'}`.
 */
childMain(async () => {
  const proxy = await startLinkProxy({ host: '127.0.0.1', port: Number(argOf('port')) }, Number(argOf('delay-ms', '25')));
  process.on('message', (message: { type?: string; fault?: string; ms?: number; direction?: LinkDirection }) => {
    if (message?.type !== 'link') return;
    if (message.fault === 'delay') proxy.delay(message.ms ?? 0, message.direction);
    else if (message.fault === 'black-hole') proxy.blackHole(message.direction);
    else if (message.fault === 'reset') proxy.reset();
    else if (message.fault === 'heal') proxy.heal();
    send({ type: 'link-done' });
  });
  send({ type: 'ready', port: proxy.port });
});
