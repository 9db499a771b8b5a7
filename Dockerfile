# syntax=docker/dockerfile:1
# PreemptGuard image: `make image` (or `docker build -t ghcr.io/preemptguard/preemptguard:0.1.0 .`).
# Needs BuildKit (Docker 23+ default) for the bind mount that installs the wheels without keeping them.

# ---- builder: the project's wheel and the wheels of its dependencies --------------------------------
FROM python:3.11-slim-bookworm AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
COPY kubectl_plugin ./kubectl_plugin
RUN pip wheel --wheel-dir /wheels .

# ---- runtime: only the installed wheels, no compiler, no pip, no source tree -----------------------
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    HOME=/tmp
RUN groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin nonroot
# The wheels are bind-mounted from the builder for this one step, so no layer keeps them.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels preemptguard \
    && pip uninstall --yes pip setuptools wheel
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["preempt-guard"]
CMD ["serve", "--in-cluster", "--tls-cert=/tls/tls.crt", "--tls-key=/tls/tls.key"]
