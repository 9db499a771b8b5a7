# PreemptGuard image. Build it with `release/build-image` (or `make image`): that script makes the two base
# images from Debian's packages (debootstrap + docker import, nothing pulled from a registry), prepares a
# build context of the sources below and the CA bundle pip needs, and passes the bases in as build args.
# Works with the classic builder and with BuildKit.
ARG BUILD_BASE=preemptguard-debian:bookworm-build
ARG BASE=preemptguard-debian:bookworm-runtime

# ---- build: a venv with the locked dependencies and the project's wheel -------------------------------
FROM ${BUILD_BASE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# The CA bundle this build machine's pip must trust (empty: pip's own). It exists in this stage only.
COPY pip-ca.crt /etc/pip-ca.crt
# Dependencies first, from the locks alone: a source change reuses this layer. --require-hashes: every file
# is the one pinned in the lock, or the build fails.
COPY release/requirements.lock release/build-requirements.lock ./release/
RUN if [ -s /etc/pip-ca.crt ]; then export PIP_CERT=/etc/pip-ca.crt; fi \
    && python3 -m venv /opt/build \
    && /opt/build/bin/pip install --quiet --require-hashes --no-deps -r release/build-requirements.lock \
    && python3 -m venv /opt/preemptguard \
    && /opt/preemptguard/bin/pip install --quiet --require-hashes --no-deps -r release/requirements.lock
COPY pyproject.toml README.md LICENSE ./
COPY webhook ./webhook
COPY kubectl_plugin ./kubectl_plugin
COPY examples ./examples
# The project's wheel with the pinned setuptools, installed without touching the index; then pip and
# setuptools leave the venv, so the runtime image cannot install anything.
RUN /opt/build/bin/pip wheel --quiet --no-deps --no-build-isolation --no-index --wheel-dir /dist . \
    && /opt/preemptguard/bin/pip install --quiet --no-deps --no-index /dist/*.whl \
    && /opt/preemptguard/bin/pip uninstall --quiet --yes pip setuptools

# ---- runtime: Debian's python3 and the venv, nothing else --------------------------------------------
FROM ${BASE}
ARG VERSION=unknown
LABEL org.opencontainers.image.title=preemptguard \
      org.opencontainers.image.description="PreemptGuard admission webhook and kubectl preempt-preview" \
      org.opencontainers.image.source=https://github.com/preemptguard/preemptguard \
      org.opencontainers.image.licenses=Apache-2.0 \
      org.opencontainers.image.version=${VERSION}
ENV PATH=/opt/preemptguard/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8 \
    HOME=/tmp
COPY --from=build /opt/preemptguard /opt/preemptguard
# nonroot (65532) exists in the runtime base; the chart and manifests run it with a read-only root.
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["preempt-guard"]
CMD ["serve", "--in-cluster", "--tls-cert=/tls/tls.crt", "--tls-key=/tls/tls.key"]
