# syntax=docker/dockerfile:1
#
# Strait's container image: a static binary on a distroless base that has
# CA certificates and nothing else (no shell, no package manager), run as a
# non-root numeric user.
#
#   docker build -t strait --build-arg COMMIT=$(git rev-parse --short=12 HEAD) .
#   docker run --rm -v $PWD/strait.yaml:/etc/strait/strait.yaml:ro -p 19092-19095:19092-19095 -p 9190:9190 strait
#
# It needs BuildKit (docker's default builder since Docker 23, and buildx)
# for its cache mounts.
#
# The config's listen addresses must not be 127.0.0.1 inside a container:
# use 0.0.0.0:PORT with advertised_host set to the name clients reach.
# docs/deploy.md covers the image and the Helm chart built on it.

# The build runs on the builder's own platform and cross-compiles, so a
# multi-platform build (docker buildx --platform linux/amd64,linux/arm64)
# does not emulate the compiler.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# The commit `strait version` names; .git is not in the build context.
ARG COMMIT=unknown
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# CGO_ENABLED=0: a static binary that needs no libc in the final image.
# -trimpath: no build-machine paths in the binary.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
	CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
	go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X github.com/straitgw/strait/internal/cli.Version=${VERSION} -X github.com/straitgw/strait/internal/cli.commit=${COMMIT}" \
		-o /out/strait ./cmd/strait

# distroless/static: CA certificates, /etc/passwd with the nonroot user,
# tzdata; no shell. Nothing in this stage runs a command.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/strait /strait
# 65532 is distroless's nonroot user; numeric, so that Kubernetes'
# runAsNonRoot can check it without reading /etc/passwd.
USER 65532:65532
# Admin (metrics, probes, reload), a Kafka bootstrap port and its first
# node ports, the LLM gateway: the ports of the examples. The config
# decides the real ones.
EXPOSE 9190 19092 19093 19094 19095 8080
ENTRYPOINT ["/strait"]
CMD ["run", "-c", "/etc/strait/strait.yaml"]
