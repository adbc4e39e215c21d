# Copyright The kbind Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

# kbind's images: the konnector and the backend, each a static Go binary on
# a minimal non-root base. `make image` builds both (it compiles the
# binaries first, version-stamped, into bin/linux_<arch>/):
#
#   docker build --target konnector --build-arg VERSION=0.1.0 -t ghcr.io/kbind/konnector:0.1.0 .
#   docker build --target backend   --build-arg VERSION=0.1.0 -t ghcr.io/kbind/backend:0.1.0 .
#
# Only the base image may be substituted (--build-arg BASE_IMAGE=...): it
# must provide /etc/passwd with uid 65532, CA certificates and a /tmp.
# `make base-image` builds such a base locally, from scratch, for machines
# that cannot pull (make test-images uses it).
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${BASE_IMAGE} AS konnector
ARG ARCH=amd64
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="kbind konnector" \
      org.opencontainers.image.description="kbind's agent: syncs the APIs a provider cluster exports into the consumer cluster it runs in." \
      org.opencontainers.image.source="https://github.com/kbind/kbind" \
      org.opencontainers.image.documentation="https://github.com/kbind/kbind/blob/main/docs/installation.md" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY bin/linux_${ARCH}/konnector /konnector
USER 65532:65532
ENTRYPOINT ["/konnector"]

FROM ${BASE_IMAGE} AS backend
ARG ARCH=amd64
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="kbind backend" \
      org.opencontainers.image.description="kbind's optional provider-side backend: reports and reaps what stale consumers left behind." \
      org.opencontainers.image.source="https://github.com/kbind/kbind" \
      org.opencontainers.image.documentation="https://github.com/kbind/kbind/blob/main/docs/backend.md" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY bin/linux_${ARCH}/backend /backend
USER 65532:65532
ENTRYPOINT ["/backend"]
