# Bobbin: multi-stage build of a static binary into a small non-root image.
# CI checks the same build command (see cmd/bot/build_test.go).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/bobbin ./cmd/bot

# distroless/static carries CA certificates and tzdata, no shell, and runs as
# uid 65532 (nonroot).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bobbin /bobbin
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/bobbin"]
