# Foya kernel image: multi-stage, slim, non-root (uid 10001), state in a volume, read-only root.
#
#   docker build -t foya .
#   docker run --read-only --tmpfs /tmp -v foya-state:/var/lib/foya \
#     -v "$PWD/auth-token.sha256:/run/secrets/foya_token_sha256:ro" foya
#
# deploy/compose.yaml runs it behind Caddy. Python 3.11 on purpose: hypercorn's shutdown can
# ignore its timeout on >= 3.12 (hypercorn issue #308), and 3.11 is what the test suite runs on.

FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
# Same base image and same /opt/foya path in both stages: a venv is not relocatable.
RUN python -m venv /opt/foya && /opt/foya/bin/pip install . && /opt/foya/bin/pip uninstall -y pip

FROM python:3.11-slim-bookworm
# git and ssh for the agent's tools; tini as PID 1 forwards SIGTERM to the kernel and reaps the
# orphans of tool processes. No curl: the healthcheck uses the kernel's own Python.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git openssh-client tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/foya --no-create-home \
        --shell /usr/sbin/nologin foya \
    && install -d -o 10001 -g 10001 -m 0700 /var/lib/foya
COPY --from=build /opt/foya /opt/foya
# /opt/foya/bin stays off PATH, so the agent's `python3` and `pip` are the image's, not the
# kernel's venv. HOME is in the volume: tools (git, npm, pip) keep their caches there, the only
# writable place besides /tmp once the root file system is read-only. No .pyc is written at run
# time; pip compiled them at build time.
ENV HOME=/var/lib/foya \
    FOYA_DATA_DIR=/var/lib/foya/data \
    FOYA_LOG_FORMAT=json \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
VOLUME ["/var/lib/foya"]
EXPOSE 8787
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/opt/foya/bin/python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/healthz', timeout=2)"]
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/foya/bin/foya"]
# Plaintext on the container network only: Caddy terminates TLS (compose publishes no kernel port).
CMD ["serve", "--listen", "0.0.0.0:8787", "--allow-plaintext", "--auth-token-hash-file", "/run/secrets/foya_token_sha256"]
