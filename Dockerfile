# Foya kernel image: multi-stage, slim, non-root (uid 10001), state in a volume.
# Python 3.11 on purpose: hypercorn's shutdown can ignore its timeout on >= 3.12 (hypercorn #308),
# and 3.11 is what the test suite exercises shutdown on.
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
RUN python -m venv /opt/foya && /opt/foya/bin/pip install --no-cache-dir .

FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends git bubblewrap curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 10001 --user-group --home-dir /var/lib/foya --create-home foya
COPY --from=build /opt/foya /opt/foya
ENV PATH=/opt/foya/bin:$PATH \
    FOYA_DATA_DIR=/var/lib/foya/data \
    FOYA_LOG_FORMAT=json \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
VOLUME ["/var/lib/foya"]
EXPOSE 8787
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s \
    CMD curl -fsS http://127.0.0.1:8787/healthz || exit 1
ENTRYPOINT ["foya"]
CMD ["serve", "--listen", "0.0.0.0:8787", "--auth-token-hash-file", "/run/secrets/foya_token_sha256", "--allow-plaintext"]
