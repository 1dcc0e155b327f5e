# burnlab's images. docker-compose.yml builds every burnlab process from the
# "service" target, naming its cmd/ package in CMD_PKG: the packages
# `make lab` builds, with the same flags. Grafana, with the pager datasource
# plugin inside, is the "grafana" target.
#
# The Go stages run on the build machine's platform and cross-compile
# (CGO_ENABLED=0), so an arm64 laptop builds amd64 images, and back, at
# native speed.
#
# Every base image is a global ARG whose default is the pinned image, and
# compose passes none of them: a user's build uses exactly these pins. An
# engine with no registry builds with stand-ins instead, made on the machine
# by `make standins` and passed by `make up-offline` (tools/standins). There
# is no `# syntax` line: it would make BuildKit fetch its Dockerfile frontend
# from a registry, and the engine's built-in one (Engine 20.10 and later) has
# all this file uses, RUN --mount among it.
ARG GO_IMAGE=golang:1.26.8
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:d093aa3e30dbadd3efe1310db061a14da60299baff8450a17fe0ccc514a16639
ARG GRAFANA_IMAGE=grafana/grafana:13.2.0

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS TARGETARCH
ENV CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH
WORKDIR /src
COPY . .
# Every image carries the healthcheck probe: distroless has no shell, curl
# or wget for compose's healthchecks. /out/data becomes each image's data
# directory, owned by the nonroot user, so named volumes start writable.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -o /out/bin/healthcheck ./shared/cmd/healthcheck && \
    mkdir -p /out/data

FROM build AS service-build
# CMD_PKG is the cmd/ package to build. VARIANT chooses the gateway's
# transcript parser, as `make lab` does: baseline (the write-up's regex and
# +=) or fixed (-tags fixed); anything else stops the build.
ARG CMD_PKG
ARG VARIANT=baseline
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    case "$VARIANT" in \
      baseline) tags="" ;; \
      fixed) tags="fixed" ;; \
      *) echo "VARIANT=$VARIANT: want baseline or fixed" >&2; exit 1 ;; \
    esac && \
    if [ -z "$CMD_PKG" ]; then echo "CMD_PKG is required, e.g. ./gateway/cmd/gateway" >&2; exit 1; fi && \
    go build -trimpath -tags "$tags" -ldflags "-X main.version=$VERSION" -o /out/bin/service "$CMD_PKG"

FROM ${RUNTIME_IMAGE} AS service
COPY --from=service-build /out/bin/ /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /var/lib/burnlab
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/service"]

FROM build AS plugin-build
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -o "/out/plugin/gpx_burnlab-pager-datasource_${GOOS}_${GOARCH}" ./grafana/plugin/cmd/pager-datasource

# Grafana with the pager datasource. Plugins live outside /var/lib/grafana,
# which is a volume that would keep last week's plugin past a rebuild. The
# directory is Grafana's user's (472); grafana.ini turns off every plugin
# install and update at start, so what the image holds is what runs.
FROM ${GRAFANA_IMAGE} AS grafana
ENV GF_PATHS_PLUGINS=/var/lib/grafana-plugins
COPY --chown=472:0 grafana/plugin/dist/plugin.json grafana/plugin/dist/module.js /var/lib/grafana-plugins/burnlab-pager-datasource/
COPY --from=plugin-build --chown=472:0 /out/plugin/ /var/lib/grafana-plugins/burnlab-pager-datasource/
