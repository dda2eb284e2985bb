# syntax=docker/dockerfile:1
# verify-worker image: a Swift build stage and a slim runtime stage holding only the libraries the binary links
# (librdkafka, libcurl, SQLite), CA certificates and the binary, run as a non-root user.

FROM swift:6.1-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends librdkafka-dev libcurl4-openssl-dev zlib1g-dev libsqlite3-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
RUN swift package resolve
COPY Sources ./Sources
RUN swift build -c release --product verify-worker --static-swift-stdlib \
    && mkdir -p /out \
    && bin="$(swift build -c release --show-bin-path)" \
    && cp "$bin/verify-worker" /out/ \
    && cp -R "$bin"/*.resources /out/

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends librdkafka1 libcurl4 zlib1g libsqlite3-0 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/verify-worker --create-home verify
COPY --from=build /out/ /usr/local/bin/
USER 10001:10001
WORKDIR /var/lib/verify-worker
EXPOSE 9464
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["verify-worker", "healthcheck", "--url", "http://127.0.0.1:9464/healthz"]
ENTRYPOINT ["verify-worker"]
CMD ["run"]
