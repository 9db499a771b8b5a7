# syntax=docker/dockerfile:1
# PreemptGuard image: `make image` (or `docker build -t ghcr.io/preemptguard/preemptguard:0.2.0 .`).
# Needs BuildKit (Docker 23+ default) for the bind mounts that install the wheels without keeping them.

# ---- deps: the wheels of the dependencies, from pyproject.toml alone ---------------------------------
# A source change does not invalidate this stage (or the runtime layer installed from it): only a change
# of pyproject.toml does.
FROM python:3.11-slim-bookworm AS deps
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > requirements.txt \
    && pip wheel --wheel-dir /wheels -r requirements.txt

# ---- builder: the project's own wheel, without dependencies ----------------------------------------
FROM python:3.11-slim-bookworm AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
COPY kubectl_plugin ./kubectl_plugin
RUN pip wheel --no-deps --wheel-dir /dist .

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
# Dependencies in their own layer: rebuilt only when pyproject.toml changes.
RUN --mount=type=bind,from=deps,source=/wheels,target=/wheels \
    pip install --no-index /wheels/*.whl
# The project on top; the wheels are bind-mounted for this one step, so no layer keeps them.
RUN --mount=type=bind,from=builder,source=/dist,target=/dist \
    --mount=type=bind,from=deps,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels /dist/*.whl \
    && pip uninstall --yes pip setuptools wheel
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["preempt-guard"]
CMD ["serve", "--in-cluster", "--tls-cert=/tls/tls.crt", "--tls-key=/tls/tls.key"]
