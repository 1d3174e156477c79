# The Siesta Runtime service image: `make image` (scripts/build-image.sh).
#
# Built from the locally created debian:bookworm-slim, as the sandbox images are
# (no registry is needed), with Python from Debian's packages. The Python
# packages come as wheels built on the host (build/wheels/): nothing is compiled
# and nothing is fetched from PyPI inside the build. The service's own wheel carries
# runtime, api, cli and the public contract (siesta_contract, whose source lives
# with the Python client in clients/python).
#
#   docker run -d -p 8080:8080 -e SIESTA_API_TOKEN=... \
#     -v /var/run/docker.sock:/var/run/docker.sock --group-add <socket gid> siesta/runtime:1
#   docker run --rm ... siesta/runtime:1 reconcile --dry-run

FROM debian:bookworm-slim AS python
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv ca-certificates libseccomp2 \
 && rm -rf /var/lib/apt/lists/*

# Dependencies first: a change to the service's own code does not reinstall them.
FROM python AS dependencies
COPY build/wheels/dependencies/ /wheels/
RUN python3 -m venv /opt/siesta \
 && /opt/siesta/bin/pip install --no-cache-dir --no-index --find-links /wheels /wheels/*.whl

FROM python
COPY --from=dependencies /opt/siesta /opt/siesta
COPY build/wheels/service/ /wheels/
RUN /opt/siesta/bin/pip install --no-cache-dir --no-index --no-deps /wheels/*.whl \
 && rm -rf /wheels \
 && useradd --system --uid 10001 --home-dir /var/lib/siesta --create-home siesta
COPY images/catalog.yaml /etc/siesta/catalog.yaml

# Configuration only through SIESTA_* variables (see the README's Configuration).
# The JavaScript workers' jail is the unprivileged one here (seccomp, rlimits, an
# empty environment): a non-root service cannot make namespaces or change uid, and
# the container is itself the outer boundary.
# The sandboxes' disk limits are loop-mounted file systems, which a non-root service
# in a container cannot make: on Docker, run the service on the host to have them
# (on Kubernetes the workspace is a sized volume claim instead).
ENV PATH=/opt/siesta/bin:$PATH \
    SIESTA_SANDBOX__WORKSPACE_SIZE_MB=0 \
    SIESTA_SANDBOX__CONTAINER_DISK_MB=0 \
    SIESTA_HTTP__HOST=0.0.0.0 \
    SIESTA_HTTP__PORT=8080 \
    SIESTA_DATA_DIR=/var/lib/siesta \
    SIESTA_IMAGES__CATALOG_PATH=/etc/siesta/catalog.yaml \
    SIESTA_JS__JAIL=unprivileged \
    PYTHONDONTWRITEBYTECODE=1
USER 10001
WORKDIR /var/lib/siesta
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ['SIESTA_HTTP__PORT']}/healthz\", timeout=2)"]
ENTRYPOINT ["/opt/siesta/bin/siesta-runtime"]
CMD ["serve"]
