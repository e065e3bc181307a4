import { writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { ConfigError, loadServerConfig } from '../../src/config.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { createApp } from '../../src/http/app.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { setLogLevel } from '../../src/util/log.js';
import { ensureTlsMinimumDefault, grpcServerCredentials, httpsServerOptions, loadTlsMaterial, type TlsMaterial } from '../../src/tls.js';
import { generateCertificate, testCertificate } from '../support/tls.js';

/** Lets OpenSSL 3 speak TLS 1.0/1.1 at all (they need SHA-1 signatures, refused at security level 1). */
const LEGACY_CIPHERS = 'DEFAULT:@SECLEVEL=0';

/** Opens a TLS connection and reports the negotiated protocol, or the error that stopped the handshake. */
function handshake(port: number, options: tls.ConnectionOptions): Promise<{ protocol: string | null } | { error: Error }> {
  return new Promise((resolve) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ...options });
    socket.once('secureConnect', () => {
      const protocol = socket.getProtocol();
      socket.destroy();
      resolve({ protocol });
    });
    socket.once('error', (error) => resolve({ error }));
  });
}

const tls11Client = (ca: Buffer): tls.ConnectionOptions => ({
  ca,
  minVersion: 'TLSv1.1',
  maxVersion: 'TLSv1.1',
  ciphers: LEGACY_CIPHERS,
});

function listen(server: https.Server | tls.Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

function close(server: https.Server | tls.Server): Promise<void> {
  return new Promise((resolve) => {
    (server as https.Server).closeAllConnections?.();
    server.close(() => resolve());
  });
}

function get(port: number, path: string, options: https.RequestOptions): Promise<{ status: number; body: string; headers: Record<string, unknown>; protocol: string | null }> {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path, servername: 'localhost', agent: false, ...options }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode!, body, headers: res.headers, protocol: (res.socket as tls.TLSSocket).getProtocol?.() ?? null }),
      );
    });
    req.on('error', reject);
  });
}

describe('TLS', () => {
  const cert = testCertificate();

  describe('loadTlsMaterial', () => {
    const config = (certFile?: string, keyFile?: string) => ({ enabled: true, certFile, keyFile });
    const expectConfigError = (fn: () => unknown, variable: string, pattern: RegExp): void => {
      try {
        fn();
      } catch (error) {
        expect(error, String(error)).to.be.instanceOf(ConfigError);
        expect((error as ConfigError).variable).to.equal(variable);
        expect((error as Error).message).to.match(pattern);
        expect((error as Error).message).not.to.contain(cert.key.toString().split('\n')[1]!);
        return;
      }
      expect.fail(`expected a ConfigError for ${variable}`);
    };

    it('reads the certificate and key named by the config', () => {
      const env = { RL_TLS_ENABLED: 'true', RL_TLS_CERT_FILE: cert.certFile, RL_TLS_KEY_FILE: cert.keyFile };
      const material = loadTlsMaterial(loadServerConfig(env).tls);
      expect(material.cert.equals(cert.cert)).to.equal(true);
      expect(material.key.equals(cert.key)).to.equal(true);
    });

    it('names RL_TLS_CERT_FILE / RL_TLS_KEY_FILE when a file is unreadable', () => {
      const missing = path.join(cert.dir, 'missing.pem');
      expectConfigError(() => loadTlsMaterial(config(missing, cert.keyFile)), 'RL_TLS_CERT_FILE', /cannot read .*missing\.pem \(ENOENT\)/);
      expectConfigError(() => loadTlsMaterial(config(cert.certFile, missing)), 'RL_TLS_KEY_FILE', /cannot read/);
      expectConfigError(() => loadTlsMaterial(config(cert.certFile, cert.dir)), 'RL_TLS_KEY_FILE', /cannot read .*EISDIR/);
    });

    it('names the variable when a file is not PEM or holds the wrong kind of PEM', () => {
      const junk = path.join(cert.dir, 'junk.pem');
      writeFileSync(junk, 'this is not a certificate\n');
      expectConfigError(() => loadTlsMaterial(config(junk, cert.keyFile)), 'RL_TLS_CERT_FILE', /not a PEM file/);
      expectConfigError(() => loadTlsMaterial(config(cert.certFile, junk)), 'RL_TLS_KEY_FILE', /not a PEM file/);
      expectConfigError(() => loadTlsMaterial(config(cert.keyFile, cert.keyFile)), 'RL_TLS_CERT_FILE', /PEM certificate/);
      expectConfigError(() => loadTlsMaterial(config(cert.certFile, cert.certFile)), 'RL_TLS_KEY_FILE', /private key/);
    });

    it('refuses a key that does not belong to the certificate', () => {
      const other = generateCertificate();
      expectConfigError(() => loadTlsMaterial(config(cert.certFile, other.keyFile)), 'RL_TLS_KEY_FILE', /does not match/);
    });

    it('config: TLS enabled without cert or key file stops start-up', () => {
      expect(() => loadServerConfig({ RL_TLS_ENABLED: 'true', RL_TLS_KEY_FILE: cert.keyFile })).to.throw(ConfigError, /RL_TLS_CERT_FILE/);
      expect(() => loadServerConfig({ RL_TLS_ENABLED: 'true', RL_TLS_CERT_FILE: cert.certFile })).to.throw(ConfigError, /RL_TLS_KEY_FILE/);
    });
  });

  describe('HTTPS', () => {
    let server: https.Server;
    let port: number;
    let counters: MemoryCounterStore;
    let material: TlsMaterial;

    before(async () => {
      material = loadTlsMaterial({ enabled: true, certFile: cert.certFile, keyFile: cert.keyFile });
      const readiness = new Readiness();
      readiness.markReady();
      counters = new MemoryCounterStore({ sweepIntervalMs: 0 });
      const decisions = new DecisionService({ policies: new LiveMatcher([]), counters, keyPrefix: 't:' });
      const app = createApp({ decisions, readiness, maxBodyBytes: 1024 });
      server = https.createServer(httpsServerOptions(material), app.callback());
      port = await listen(server);
    });

    after(async () => {
      await close(server);
      await counters.close();
    });

    it('sets TLS 1.2 as the minimum', () => {
      expect(httpsServerOptions(material)).to.include({ minVersion: 'TLSv1.2' });
    });

    it('answers /healthz to a client that trusts the certificate (by name and by IP)', async () => {
      const r = await get(port, '/healthz', { ca: cert.cert });
      expect(r.status).to.equal(200);
      expect(r.body).to.equal('ok');
      expect(r.protocol).to.be.oneOf(['TLSv1.2', 'TLSv1.3']);
      expect(r.headers['strict-transport-security']).to.match(/max-age=/);
      const byIp = await get(port, '/healthz', { ca: cert.cert, servername: undefined });
      expect(byIp.status).to.equal(200);
    });

    it('a client that does not trust the certificate fails verification', async () => {
      const error = await get(port, '/healthz', {}).then(
        () => undefined,
        (e: Error & { code?: string }) => e,
      );
      expect(error?.code).to.match(/SELF_SIGNED|UNABLE_TO_VERIFY|DEPTH_ZERO/);
    });

    it('a TLS 1.2-only client is served', async () => {
      const result = await handshake(port, { ca: cert.cert, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2' });
      expect(result).to.deep.equal({ protocol: 'TLSv1.2' });
    });

    it('a TLS 1.1-only client is refused', async () => {
      const result = await handshake(port, tls11Client(cert.cert));
      expect(result).to.have.property('error');
      // alert 70 "protocol version": refused for its version, not for some other handshake problem
      expect(String((result as { error: Error }).error)).to.match(/alert protocol version/i);
    });

    it('control: the same TLS 1.1 client does get through to a server that allows TLS 1.1 (so the refusal above is the minimum at work)', async function () {
      const legacy = tls.createServer({ ...httpsServerOptions(material), minVersion: 'TLSv1.1', ciphers: LEGACY_CIPHERS }, (s) => s.end());
      const legacyPort = await listen(legacy);
      try {
        const result = await handshake(legacyPort, tls11Client(cert.cert));
        if ('error' in result) this.skip(); // this OpenSSL build cannot speak TLS 1.1 at all
        expect(result).to.deep.equal({ protocol: 'TLSv1.1' });
      } finally {
        await close(legacy);
      }
    });
  });

  describe('gRPC server credentials', () => {
    let server: grpc.Server;
    let port: number;

    before(async () => {
      const material = loadTlsMaterial({ enabled: true, certFile: cert.certFile, keyFile: cert.keyFile });
      server = new grpc.Server();
      port = await new Promise<number>((resolve, reject) =>
        server.bindAsync('127.0.0.1:0', grpcServerCredentials(material), (error, p) => (error ? reject(error) : resolve(p))),
      );
    });

    after(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())));

    it("Node's default TLS minimum, which grpc-js inherits, is TLSv1.2", () => {
      expect(tls.DEFAULT_MIN_VERSION).to.equal('TLSv1.2');
      expect(ensureTlsMinimumDefault()).to.equal('TLSv1.2');
    });

    it('a TLS 1.2 HTTP/2 client completes the handshake with the certificate', async () => {
      const result = await handshake(port, { ca: cert.cert, maxVersion: 'TLSv1.2', ALPNProtocols: ['h2'] });
      expect(result).to.deep.equal({ protocol: 'TLSv1.2' });
    });

    it('a TLS 1.1-only client is refused', async () => {
      const result = await handshake(port, { ...tls11Client(cert.cert), ALPNProtocols: ['h2'] });
      expect(result).to.have.property('error');
      expect(String((result as { error: Error }).error)).to.match(/alert protocol version/i);
    });

    it('a lowered process default (node --tls-min-v1.0) is raised back to TLSv1.2', () => {
      const saved = tls.DEFAULT_MIN_VERSION;
      setLogLevel('error'); // the warning it logs is expected here
      try {
        tls.DEFAULT_MIN_VERSION = 'TLSv1';
        grpcServerCredentials({ cert: cert.cert, key: cert.key });
        expect(tls.DEFAULT_MIN_VERSION).to.equal('TLSv1.2');
      } finally {
        tls.DEFAULT_MIN_VERSION = saved;
        setLogLevel('info');
      }
    });
  });
});
