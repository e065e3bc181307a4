import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/**
 * examples/envoy/envoy.yaml stays a configuration Envoy would load for this service: no Envoy binary
 * here, so the parts the service depends on are checked structurally.
 */
describe('examples/envoy/envoy.yaml', () => {
  const config = parse(readFileSync(new URL('../../examples/envoy/envoy.yaml', import.meta.url), 'utf8'));
  const text = JSON.stringify(config);

  it('is YAML with listeners and clusters', () => {
    expect(config.static_resources.listeners).to.be.an('array').that.is.not.empty;
    expect(config.static_resources.clusters).to.be.an('array').that.is.not.empty;
  });

  it('points the ratelimit filter at the service over the v3 protocol, through an HTTP/2 cluster', () => {
    const filters: { name: string; typed_config: Record<string, any> }[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node && typeof node === 'object') {
        const n = node as Record<string, unknown>;
        if (n.name === 'envoy.filters.http.ratelimit') filters.push(n as never);
        Object.values(n).forEach(walk);
      }
    };
    walk(config);
    expect(filters).to.have.length(1);
    const ratelimit = filters[0].typed_config;
    expect(ratelimit['@type']).to.equal('type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit');
    expect(ratelimit.rate_limit_service.transport_api_version).to.equal('V3');
    const clusterName = ratelimit.rate_limit_service.grpc_service.envoy_grpc.cluster_name;
    const cluster = config.static_resources.clusters.find((c: { name: string }) => c.name === clusterName);
    expect(cluster, `cluster ${clusterName}`).to.exist;
    expect(JSON.stringify(cluster)).to.contain('http2_protocol_options');
  });

  it('leaves the rate-limit headers to the service (one set per response)', () => {
    expect(text).to.not.contain('enable_x_ratelimit_headers');
  });
});
