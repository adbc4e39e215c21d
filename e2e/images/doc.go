// Package images proves kbind's release artifacts: each image, built by
// `make image`, runs the way its chart's Deployment runs it. Without a
// kubelet, the tests do the kubelet's part: they render the chart, turn the
// Deployment's container into a `docker run` (user, read-only root
// filesystem, capabilities, resources, env, a real ServiceAccount token and
// CA at the in-cluster path, KUBERNETES_SERVICE_HOST/PORT), and check the
// binary syncs, answers its probes and metrics on the chart's ports and
// stops cleanly within the grace period.
//
// The Docker tests run only under `make test-images` (KBIND_TEST_IMAGES=1,
// which builds the images first); the derivation of the docker command line
// from a Deployment is a pure function tested everywhere.
package images
