/**
 * Native TLS (RL_TLS_ENABLED, RL_TLS_CERT_FILE, RL_TLS_KEY_FILE): one certificate and key, read once
 * at start-up, serve both HTTPS and gRPC. TLS 1.2 is the minimum on both:
 *
 * - HTTPS: `minVersion: 'TLSv1.2'` is set explicitly in the server options.
 * - gRPC: grpc-js builds its `http2.createSecureServer` options from `ServerCredentials.createSsl`
 *   (cert, key, ciphers, requestCert) and a few channel options; it has no option that reaches
 *   `minVersion` (channel options only tune HTTP/2 settings). The secure context therefore takes
 *   Node's process default, `tls.DEFAULT_MIN_VERSION`, which is 'TLSv1.2' on Node 20 (verified on
 *   v20.20: `tls.DEFAULT_MIN_VERSION === 'TLSv1.2'`) unless the process was started with
 *   `--tls-min-v1.0` / `--tls-min-v1.1` or something lowered it. `grpcServerCredentials` checks that
 *   default and raises it back to TLSv1.2 (logging a warning) when it is lower, so the guarantee does
 *   not depend on how node was launched. (HTTP/2 itself also forbids anything below TLS 1.2, RFC 9113 §9.2.)
 */
import { readFileSync } from 'node:fs';
import type https from 'node:https';
import tls from 'node:tls';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { ConfigError, type TlsConfig } from './config.js';
import { log } from './util/log.js';

export const TLS_MIN_VERSION = 'TLSv1.2' as const;

export interface TlsMaterial {
  /** PEM certificate chain (leaf first). */
  cert: Buffer;
  /** PEM private key. */
  key: Buffer;
}

/**
 * Reads and checks the certificate and key named by the config. Throws ConfigError naming
 * RL_TLS_CERT_FILE / RL_TLS_KEY_FILE when a file is missing, unreadable, not PEM, or when the key
 * does not belong to the certificate. The key's content never appears in a message.
 */
export function loadTlsMaterial(config: TlsConfig): TlsMaterial {
  if (!config.certFile) throw new ConfigError('RL_TLS_CERT_FILE', 'must be set when RL_TLS_ENABLED is true');
  if (!config.keyFile) throw new ConfigError('RL_TLS_KEY_FILE', 'must be set when RL_TLS_ENABLED is true');
  const cert = readPem('RL_TLS_CERT_FILE', config.certFile);
  const key = readPem('RL_TLS_KEY_FILE', config.keyFile);

  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    throw new ConfigError('RL_TLS_CERT_FILE', `${config.certFile} does not hold a PEM certificate`);
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new ConfigError('RL_TLS_KEY_FILE', `${config.keyFile} does not hold an unencrypted PEM private key`);
  }
  if (!x509.checkPrivateKey(privateKey)) {
    throw new ConfigError('RL_TLS_KEY_FILE', `the key in ${config.keyFile} does not match the certificate in ${config.certFile}`);
  }
  return { cert, key };
}

function readPem(variable: string, file: string): Buffer {
  let content: Buffer;
  try {
    content = readFileSync(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'read error';
    throw new ConfigError(variable, `cannot read ${file} (${code})`);
  }
  if (!content.toString('latin1').includes('-----BEGIN ')) {
    throw new ConfigError(variable, `${file} is not a PEM file (no "-----BEGIN" line)`);
  }
  return content;
}

/** Options for `https.createServer(options, app.callback())`. */
export function httpsServerOptions(material: TlsMaterial): https.ServerOptions {
  return { cert: material.cert, key: material.key, minVersion: TLS_MIN_VERSION };
}

/**
 * Credentials for `grpcServer.bindAsync(addr, credentials, cb)`: server-side TLS only (no client
 * certificates). Makes sure the process-wide TLS minimum, which grpc-js's secure server inherits, is
 * at least TLSv1.2 (see the module comment).
 */
export function grpcServerCredentials(material: TlsMaterial): grpc.ServerCredentials {
  ensureTlsMinimumDefault();
  return grpc.ServerCredentials.createSsl(null, [{ cert_chain: material.cert, private_key: material.key }], false);
}

const VERSION_ORDER = ['TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'];

/** Raises `tls.DEFAULT_MIN_VERSION` to TLSv1.2 when it is lower; returns the value in force afterwards. */
export function ensureTlsMinimumDefault(): string {
  const current = tls.DEFAULT_MIN_VERSION;
  if (VERSION_ORDER.indexOf(current) < VERSION_ORDER.indexOf(TLS_MIN_VERSION)) {
    log.warn('raising the process TLS minimum to TLSv1.2', { was: current });
    tls.DEFAULT_MIN_VERSION = TLS_MIN_VERSION;
  }
  return tls.DEFAULT_MIN_VERSION;
}
