import { startDelayProxy } from '../../test/support/delay-proxy.js';
import { argOf, childMain, send } from './common.js';

/**
 * Scenario 13's WAN link: the TCP delay proxy of the tests in a process of its own, so its timers are
 * not delayed by the load generator's. `--port <redis port> --delay-ms <n>`; answers `{type: 'ready', port}`.
 */
childMain(async () => {
  const proxy = await startDelayProxy({ host: '127.0.0.1', port: Number(argOf('port')) }, Number(argOf('delay-ms', '25')));
  send({ type: 'ready', port: proxy.port });
});
