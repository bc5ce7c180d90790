# Matricxon in a container, on Debian 12 only: the build stage compiles it with
# the Debian packages scripts/install-deps.sh installs and packs the same .deb
# the project ships (cpack); the image installs that .deb into a slim Debian 12,
# so apt pulls exactly the package's Depends. docs/install.md, "Container":
#   docker build -t matricxon --build-arg MATRICXON_GIT_COMMIT="$(git rev-parse --short=12 HEAD)" .
#   docker run -d --name matricxon -p 127.0.0.1:8080:8080 -v matricxon:/var/lib/matricxon \
#     -e MATRICXON_ADMIN_TOKEN="$(openssl rand -hex 24)" matricxon
FROM debian:bookworm AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       build-essential cmake ninja-build pkg-config dpkg-dev file \
       libssl-dev libcpp-httplib-dev nlohmann-json3-dev libpcre2-dev libedit-dev \
       libpng-dev libjpeg-dev libwebp-dev libgif-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The build context has no .git (.dockerignore): the commit comes from here.
ARG MATRICXON_GIT_COMMIT=unknown
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
       -DMATRICXON_TESTS=OFF -DMATRICXON_BENCH=OFF \
       -DMATRICXON_GIT_COMMIT="${MATRICXON_GIT_COMMIT}" \
    && ninja -C /build matricxon \
    && cd /build && cpack -G DEB

FROM debian:bookworm-slim
COPY --from=build /build/matricxon_*.deb /tmp/
# postinst makes the matricxon user and /var/lib/matricxon (0700) without systemd.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends /tmp/matricxon_*.deb \
    && rm -rf /var/lib/apt/lists/* /tmp/matricxon_*.deb
# Listening on every address of the container needs MATRICXON_ADMIN_TOKEN
# (docker run -e ...): without it the server refuses to start, saying so.
ENV MATRICXON_HOST=0.0.0.0 \
    MATRICXON_PORT=8080 \
    MATRICXON_MODELS_DIR=/var/lib/matricxon/models \
    MATRICXON_PROMPT_CACHE_DIR=/var/lib/matricxon/prompt_cache
USER matricxon
WORKDIR /var/lib/matricxon
VOLUME ["/var/lib/matricxon"]
EXPOSE 8080
# bash's /dev/tcp: the slim image has no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
  CMD ["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /health HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n' >&3 && grep -q '\"status\":\"ok\"' <&3"]
# SIGTERM: the replies in flight finish and the RAM caches are written to the volume.
STOPSIGNAL SIGTERM
CMD ["/usr/bin/matricxon", "serve"]
