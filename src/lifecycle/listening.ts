import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ListenAddress } from '../config.js';

/** Listens on `address`; resolves with the port taken (the one chosen when the address asks for 0). */
export function listen(server: http.Server, address: ListenAddress): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Stops accepting, closes idle keep-alive sockets, and force-closes whatever is left after the deadline. */
export function closeGracefully(server: http.Server, deadlineMs: number): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    const timer = setTimeout(() => server.closeAllConnections(), deadlineMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}
