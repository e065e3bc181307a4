/**
 * A throw-away self-signed certificate for TLS tests, generated at run time with `openssl` (no key is
 * ever committed): EC P-256, valid one day, CN=localhost, SAN DNS:localhost and IP:127.0.0.1, so a
 * client that trusts `cert` and connects to `localhost` or `127.0.0.1` verifies it normally.
 *
 *   const cert = testCertificate();                    // generated once per test process, then cached
 *   https.createServer(httpsServerOptions({ cert: cert.cert, key: cert.key }), …)
 *   https.get({ …, ca: cert.cert })                     // HTTP client
 *   grpc.credentials.createSsl(cert.cert)               // gRPC client (target 'localhost:PORT' or '127.0.0.1:PORT')
 *   loadServerConfig({ RL_TLS_ENABLED: 'true', RL_TLS_CERT_FILE: cert.certFile, RL_TLS_KEY_FILE: cert.keyFile })
 *
 * The directory is removed when the process exits.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface TestCertificate {
  dir: string;
  certFile: string;
  keyFile: string;
  /** PEM certificate; also the CA a client must trust (it is self-signed). */
  cert: Buffer;
  /** PEM private key (PKCS#8). */
  key: Buffer;
}

let cached: TestCertificate | undefined;

/** The process-wide test certificate (generated on first call). */
export function testCertificate(): TestCertificate {
  cached ??= generateCertificate();
  return cached;
}

/** A fresh certificate in a fresh temp directory (for tests that need two different ones). */
export function generateCertificate(commonName = 'localhost'): TestCertificate {
  const dir = mkdtempSync(path.join(tmpdir(), 'rl-tls-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const certFile = path.join(dir, 'cert.pem');
  const keyFile = path.join(dir, 'key.pem');
  try {
    execFileSync(
      'openssl',
      [
        'req', '-x509',
        '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
        '-nodes', '-days', '1',
        '-subj', `/CN=${commonName}`,
        '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
        '-keyout', keyFile, '-out', certFile,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`openssl could not generate a test certificate: ${(error as Error).message}\n${stderr}`);
  }
  return { dir, certFile, keyFile, cert: readFileSync(certFile), key: readFileSync(keyFile) };
}
