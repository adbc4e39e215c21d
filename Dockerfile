# The konnector image: a static binary on a distroless base, running as
# non-root. Build with `make image` (needs Docker; not available on every
# development machine — the tests never need it).
FROM golang:1.26 AS build
WORKDIR /src
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/konnector ./konnector/cmd/konnector

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/konnector /konnector
USER 65532:65532
ENTRYPOINT ["/konnector"]
