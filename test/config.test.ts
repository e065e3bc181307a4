import { expect } from 'chai';
import { ConfigError, loadServerConfig } from '../src/config.js';

/** loadServerConfig(env) stops with a ConfigError whose message starts with `variable`. */
function expectStopsNaming(env: Record<string, string>, variable: string): void {
  expect(() => loadServerConfig(env))
    .to.throw(ConfigError)
    .with.property('message')
    .that.matches(new RegExp(`^${variable}: `));
}

describe('server config', () => {
  it('has the documented defaults', () => {
    const c = loadServerConfig({});
    expect(c).to.deep.include({
      policyFile: 'examples/policies.json',
      httpAddr: { host: undefined, port: 8080 },
      grpcAddr: { host: undefined, port: 9090 },
      invalidationTargets: [],
      counterStoreAddr: undefined,
      counterStoreTimeoutMs: 100,
      keyPrefix: 'rl:',
      maxBodyBytes: 1024 * 1024,
      dataDir: './data',
      drainSecs: 10,
      shutdownDelaySecs: 5,
      metricsLabelCap: 1000,
      http: { headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, keepAliveTimeoutMs: 5_000 },
      envoyHeaders: 'ietf',
      envoyHeaderDescriptors: 'limiting',
      envoyConsumeAll: false,
    });
    expect(c.tls).to.deep.equal({ enabled: false, certFile: undefined, keyFile: undefined });
    expect(c.auth).to.deep.include({ enabled: false, roleClaim: 'role', exemptPaths: ['/healthz', '/readyz'] });
  });

  it('seeds the demo policies in memory mode only; a shared counter store only from RL_POLICY_FILE', () => {
    expect(loadServerConfig({}).policyFile).to.equal('examples/policies.json');
    expect(loadServerConfig({ RL_POLICY_FILE: 'mine.yaml' }).policyFile).to.equal('mine.yaml');
    expect(loadServerConfig({ RL_COUNTERSTORE_ADDR: 'redis://127.0.0.1:6379' }).policyFile).to.equal(undefined);
    expect(loadServerConfig({ RL_COUNTERSTORE_ADDR: 'redis://127.0.0.1:6379', RL_POLICY_FILE: ' ' }).policyFile).to.equal(undefined);
    expect(loadServerConfig({ RL_COUNTERSTORE_ADDR: 'redis://127.0.0.1:6379', RL_POLICY_FILE: 'mine.yaml' }).policyFile).to.equal('mine.yaml');
    const regions = { RL_COUNTERSTORE_ADDR: 'redis://127.0.0.1:6379', RL_REGION: 'eu', RL_GLOBAL_COUNTERSTORE_ADDR: 'redis://127.0.0.1:6380' };
    expect(loadServerConfig(regions).policyFile).to.equal(undefined);
    expect(loadServerConfig({ ...regions, RL_POLICY_FILE: 'mine.yaml' }).policyFile).to.equal('mine.yaml');
  });

  it('parses listen addresses: every interface, one host, IPv6, port 0', () => {
    const listen = (v: string) => loadServerConfig({ RL_HTTP_ADDR: v }).httpAddr;
    expect(listen(':8081')).to.deep.equal({ host: undefined, port: 8081 });
    expect(listen('127.0.0.1:0')).to.deep.equal({ host: '127.0.0.1', port: 0 });
    expect(listen('[::1]:9000')).to.deep.equal({ host: '::1', port: 9000 });
    expect(listen('localhost:80')).to.deep.equal({ host: 'localhost', port: 80 });
  });

  const bad: [string, string][] = [
    ['RL_HTTP_ADDR', '8080'],
    ['RL_HTTP_ADDR', 'host:99999'],
    ['RL_GRPC_ADDR', 'nope'],
    ['RL_MAX_BODY_BYTES', '1MB'],
    ['RL_MAX_BODY_BYTES', '0'],
    ['RL_DRAIN_SECS', '-1'],
    ['RL_SHUTDOWN_DELAY_SECS', 'soon'],
    ['RL_ENVOY_HEADERS', 'draft-03'],
    ['RL_ENVOY_HEADER_DESCRIPTORS', 'every'],
    ['RL_RLQS_BUCKET_IDLE_SECS', '0'],
    ['RL_RLQS_BUCKET_IDLE_SECS', '3601'],
    ['RL_HTTP_HEADERS_TIMEOUT_SECS', '0'],
    ['RL_HTTP_HEADERS_TIMEOUT_SECS', '60'],
    ['RL_HTTP_REQUEST_TIMEOUT_SECS', '1.5'],
    ['RL_HTTP_KEEPALIVE_TIMEOUT_SECS', '-5'],
    ['RL_COUNTERSTORE_TIMEOUT_MS', 'fast'],
    ['RL_TLS_ENABLED', 'maybe'],
    ['RL_INVALIDATION_TARGETS', 'ftp://sidecar:18080'],
    ['RL_INVALIDATION_TARGETS', 'not a url'],
    ['RL_COUNTERSTORE_ADDR', 'ftp://redis:6379'],
    ['RL_COUNTERSTORE_ADDR', 'redis://h:0'],
    ['RL_COUNTERSTORE_ADDR', 'redis+unix://relative/redis.sock'],
  ];
  for (const [variable, value] of bad) {
    it(`stops on ${variable}=${value} with a message naming the variable`, () => {
      expectStopsNaming({ [variable]: value }, variable);
    });
  }

  it('turns tracing on only with an OTLP endpoint; refuses a protocol or endpoint it cannot use, naming the variable', () => {
    expect(loadServerConfig({}).tracing).to.equal(undefined);
    expect(loadServerConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }).tracing).to.equal(undefined);
    expect(loadServerConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracing).to.deep.equal({ protocol: 'http/protobuf' });
    expect(loadServerConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }).tracing).to.deep.equal({ protocol: 'http/json' });
    expect(loadServerConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }).tracing).to.equal(undefined);
    expect(() => loadServerConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).to.throw(ConfigError, /^OTEL_EXPORTER_OTLP_PROTOCOL: /);
    expect(() => loadServerConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' })).to.throw(ConfigError, /^OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: /);
    expect(() => loadServerConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'collector:4318' })).to.throw(ConfigError, /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: /);
  });

  it('requires the certificate and key when TLS is enabled', () => {
    expect(() => loadServerConfig({ RL_TLS_ENABLED: 'true', RL_TLS_KEY_FILE: 'k' })).to.throw(/RL_TLS_CERT_FILE/);
    expect(() => loadServerConfig({ RL_TLS_ENABLED: 'true', RL_TLS_CERT_FILE: 'c' })).to.throw(/RL_TLS_KEY_FILE/);
  });

  it('takes a Unix socket address for the counter store', () => {
    expect(loadServerConfig({ RL_COUNTERSTORE_ADDR: 'redis+unix:///run/redis/redis.sock?db=1' }).counterStoreAddr).to.equal(
      'redis+unix:///run/redis/redis.sock?db=1',
    );
  });

  describe('regions', () => {
    const regional = { RL_COUNTERSTORE_ADDR: 'redis://eu-redis:6379' };
    it('reads RL_REGION, RL_GLOBAL_COUNTERSTORE_ADDR and the global timeout (default 1000 ms)', () => {
      expect(loadServerConfig(regional).region).to.equal(undefined);
      const c = loadServerConfig({ ...regional, RL_REGION: 'eu-west-1', RL_GLOBAL_COUNTERSTORE_ADDR: 'redis://global:6379' });
      expect(c.region).to.deep.equal({ name: 'eu-west-1', globalStoreAddr: 'redis://global:6379', globalTimeoutMs: 1000 });
      const slow = { ...regional, RL_REGION: 'us', RL_GLOBAL_COUNTERSTORE_ADDR: 'global:6379', RL_GLOBAL_COUNTERSTORE_TIMEOUT_MS: '2500' };
      expect(loadServerConfig(slow).region?.globalTimeoutMs).to.equal(2500);
    });

    const badRegions: [Record<string, string>, string][] = [
      [{ ...regional, RL_REGION: 'eu' }, 'RL_GLOBAL_COUNTERSTORE_ADDR'],
      [{ ...regional, RL_GLOBAL_COUNTERSTORE_ADDR: 'redis://global:6379' }, 'RL_REGION'],
      [{ RL_REGION: 'eu', RL_GLOBAL_COUNTERSTORE_ADDR: 'redis://global:6379' }, 'RL_COUNTERSTORE_ADDR'],
      [{ ...regional, RL_REGION: 'EU_West', RL_GLOBAL_COUNTERSTORE_ADDR: 'redis://global:6379' }, 'RL_REGION'],
      [{ ...regional, RL_REGION: 'a'.repeat(33), RL_GLOBAL_COUNTERSTORE_ADDR: 'redis://global:6379' }, 'RL_REGION'],
      [{ ...regional, RL_REGION: 'eu', RL_GLOBAL_COUNTERSTORE_ADDR: 'ftp://global:6379' }, 'RL_GLOBAL_COUNTERSTORE_ADDR'],
      [{ ...regional, RL_REGION: 'eu', RL_GLOBAL_COUNTERSTORE_ADDR: 'global:6379', RL_GLOBAL_COUNTERSTORE_TIMEOUT_MS: '0' }, 'RL_GLOBAL_COUNTERSTORE_TIMEOUT_MS'],
    ];
    for (const [env, variable] of badRegions) {
      it(`stops on ${JSON.stringify(env)} naming ${variable}`, () => {
        expectStopsNaming(env, variable);
      });
    }
  });

  const bounded: { variable: string; field: 'leaseMaxWaitMs' | 'counterSnapshotSecs'; range: string; byDefault: number; valid: [string, number][]; bad: string[] }[] = [
    { variable: 'RL_LEASE_MAX_WAIT_MS', field: 'leaseMaxWaitMs', range: 'default 100, 0–10000', byDefault: 100, valid: [['0', 0], ['10000', 10_000]], bad: ['-1', '10001', '1.5', 'soon'] },
    { variable: 'RL_COUNTER_SNAPSHOT_SECS', field: 'counterSnapshotSecs', range: 'default 5, 0 = off, up to 3600', byDefault: 5, valid: [['0', 0], ['3600', 3600]], bad: ['-1', '3601', '0.5', 'often'] },
  ];
  for (const { variable, field, range, byDefault, valid, bad } of bounded) {
    it(`reads ${variable} (${range}) and stops naming it when out of range`, () => {
      expect(loadServerConfig({})[field]).to.equal(byDefault);
      for (const [text, value] of valid) expect(loadServerConfig({ [variable]: text })[field]).to.equal(value);
      for (const text of bad) expectStopsNaming({ [variable]: text }, variable);
    });
  }

  it('normalises invalidation targets', () => {
    const c = loadServerConfig({ RL_INVALIDATION_TARGETS: 'http://a:18080/, https://b:18080' });
    expect(c.invalidationTargets).to.deep.equal(['http://a:18080', 'https://b:18080']);
  });
});
