# qos-guard webhook image: `qos-guard serve` as a non-root user on a slim Python base.
# Build: docker build -t qos-guard/qos-guard:0.1.0 .
# BASE_IMAGE: any Debian-like image with python3 >= 3.11 and pip on PATH. The node tests build one locally from
# Debian packages (hack/node-images.sh) because no image registry is reachable there.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
# A wheel of the package and of its runtime dependencies only (no test extras).
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${BASE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels qos-guard \
    && groupadd --gid 65532 qos-guard \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin qos-guard
# Numeric, so kubelet can check runAsNonRoot without reading /etc/passwd.
USER 65532:65532
WORKDIR /tmp
EXPOSE 8443 8080
ENTRYPOINT ["qos-guard"]
CMD ["serve"]
