# One image for every Toolgate service; the command picks the service:
#   docker run ghcr.io/toolgate/toolgate node services/gateway/dist/main.js
# (gateway, permission-evaluator, tool-executor, journal, worktree; all-in-one for a single box).

FROM node:22-bookworm-slim AS build
WORKDIR /app
ENV NX_DAEMON=false NX_NO_CLOUD=true NX_SKIP_NX_CACHE=true CI=true
COPY . .
RUN npm ci --no-audit --no-fund
# The system-tests project is not shipped; everything else is compiled to each project's dist/.
RUN npx nx run-many -t build --exclude=@toolgate/system-tests \
 && npm prune --omit=dev --no-audit --no-fund

FROM node:22-bookworm-slim AS runtime
# git: the worktree service drives it (simple-git); tini: signals reach node as PID 1 would not;
# bubblewrap and util-linux (prlimit): the tool-executor's sandbox for shell and subprocess tools.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git tini ca-certificates bubblewrap util-linux \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 toolgate \
 && useradd --uid 10001 --gid toolgate --home-dir /app --shell /usr/sbin/nologin toolgate
WORKDIR /app
# A 32 MiB young generation (semi-space; V8's default is 16): each message's short-lived garbage
# dies there instead of being scavenged and promoted — a fifth less GC per dispatch (README, Benchmarks).
ENV NODE_ENV=production NODE_OPTIONS=--max-semi-space-size=32
COPY --from=build --chown=root:root /app/package.json /app/package-lock.json ./
COPY --from=build --chown=root:root /app/node_modules node_modules
COPY --from=build --chown=root:root /app/contracts contracts
COPY --from=build --chown=root:root /app/libs libs
COPY --from=build --chown=root:root /app/services services
COPY --chown=root:root deploy/docker/healthcheck.js deploy/docker/healthcheck.js
# The code is root-owned and read-only for the service user; state goes to volumes (/data).
RUN mkdir -p /data /workspace /state && chown toolgate:toolgate /data /workspace /state
USER 10001:10001
EXPOSE 8080 8081 8082 8083 8084
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 CMD ["node", "deploy/docker/healthcheck.js"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "services/all-in-one/dist/main.js"]
