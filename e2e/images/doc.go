/*
Copyright The kbind Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

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
