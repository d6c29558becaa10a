# syntax=docker/dockerfile:1
# One image with every receipts binary in /usr/local/bin, static (CGO off),
# on distroless static as the nonroot user (65532). The chart picks the
# binary with `command:`; see docs/operations.md ("Building the image").
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) -t receipts:dev .
#
# or `make image` (IMAGE=..., VERSION=..., REVISION=...).

ARG GO_VERSION=1.26.8

# The build stage runs on the builder's own platform and cross-compiles for
# the target one (buildx --platform linux/amd64,linux/arm64 works as is).
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# VERSION and REVISION (the commit) are stamped into every binary's
# cli.Version and cli.Revision (their --version, receipts_build_info): the
# build context has no .git, so Go stamps no revision of its own.
ARG VERSION=dev
ARG REVISION=
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-X github.com/readstate/receipts/cmd/internal/cli.Version=${VERSION} -X github.com/readstate/receipts/cmd/internal/cli.Revision=${REVISION}" -o /out/ ./cmd/...

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=
LABEL org.opencontainers.image.title="receipts" \
      org.opencontainers.image.description="read/delivery receipts: kafkagate, persister, dlt-reconciler, receiptsctl (and the dev-only devbroker)" \
      org.opencontainers.image.source="https://github.com/readstate/receipts" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/ /usr/local/bin/
USER nonroot:nonroot
# No default service: run the binary you want (the chart sets command).
CMD ["receiptsctl", "--help"]
