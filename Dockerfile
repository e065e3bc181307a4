# The rate-limit decision service and its sidecar agent, one image:
#   server (default):  docker run --stop-timeout 20 rl-decision-service
#   sidecar agent:     docker run --stop-timeout 20 rl-decision-service node dist/agent/main.js
# (--stop-timeout: docker stop's default 10 s is less than a drain may take, docs/deployment.md.)
#
# Node runs directly (no npm, no shell) so that SIGTERM reaches it and the drain of RL_DRAIN_SECS happens;
# the entry points install their own SIGTERM/SIGINT handlers, which is what a PID 1 process needs.

ARG NODE_IMAGE=node:20-bookworm-slim

# ---- build: TypeScript → dist/, with the dev dependencies -------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The SDK is an npm workspace: its package.json must be there for npm ci to link it.
COPY sdk/package.json ./sdk/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY sdk ./sdk
# The SDK's build copies proto/rl into its package.
COPY proto ./proto
COPY dashboard ./dashboard
COPY src ./src
RUN npm run build

# ---- runtime: production dependencies only, non-root ---------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
COPY sdk/package.json ./sdk/
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
# dist/ holds the server, the CLI (dist/cli/main.js) and the dashboard's built assets (dist/dashboard).
COPY --from=build /app/dist ./dist
COPY --from=build /app/sdk/dist ./sdk/dist
# Read at run time relative to dist/ (Lua scripts, gRPC protos) and to the working directory
# (RL_POLICY_FILE defaults to examples/policies.json, the demo a memory-mode server seeds).
COPY lua ./lua
COPY proto ./proto
COPY examples ./examples
# The single-node policy journal (RL_DATA_DIR); mount a volume here to keep policies across restarts.
RUN mkdir -p /app/data && chown 1000:1000 /app/data
ENV RL_HTTP_ADDR=:8080 \
    RL_GRPC_ADDR=:9090 \
    RL_AGENT_LISTEN=:18080 \
    RL_DATA_DIR=/app/data
# The image's `node` user, by number so that Kubernetes' runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 8080 9090 18080
STOPSIGNAL SIGTERM
CMD ["node", "dist/main.js"]
