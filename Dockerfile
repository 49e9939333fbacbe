# Bobbin images, both built from the same static binary:
#
#   docker build -t REGISTRY/bobbin:TAG .
#       distroless, no shell, runs as uid 65532 (the default target, last
#       below). Enough for MCP servers reached over HTTP(S).
#   docker build --target bobbin-node -t REGISTRY/bobbin:TAG-node .
#       adds Node.js and the npm MCP servers named in MCP_NPM_PACKAGES,
#       installed at build time (pinned, no download at run time), for
#       stdio servers in MCP_CONFIG (command: [mcp-server-memory], …).
#
# CI has no Docker engine: cmd/bot/build_test.go runs this file's go build
# command and checks every target copies its output.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/bobbin ./cmd/bot

# The Node variant. stdio servers get only PATH, HOME and their own env
# (docs/mcp.md); HOME is /tmp and files they keep go to
# /data, both writable volumes in docker-compose.yml and deploy/.
FROM node:22-bookworm-slim AS bobbin-node
ARG MCP_NPM_PACKAGES="@modelcontextprotocol/server-memory@2026.8.31"
RUN npm install --global --omit=dev --no-audit --no-fund ${MCP_NPM_PACKAGES} \
 && npm cache clean --force \
 && mkdir -p /data && chown 65532:65532 /data
COPY --from=build /out/bobbin /usr/local/bin/bobbin
ENV HOME=/tmp NODE_ENV=production
# Numeric, so Kubernetes' runAsNonRoot can check it.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/bobbin"]

# The default image. distroless/static carries CA certificates and tzdata,
# no shell; 65532 is its "nonroot" user, numeric for runAsNonRoot.
FROM gcr.io/distroless/static-debian12:nonroot AS bobbin
COPY --from=build /out/bobbin /bobbin
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/bobbin"]
