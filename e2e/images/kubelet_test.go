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

package images

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kbind/kbind/e2e/harness"
)

var testInput = runInput{Name: "kbind-konnector", Namespace: "kbind", ServiceAccountDir: "/tmp/sa", APIHost: "127.0.0.1", APIPort: "6443"}

// renderPod renders a chart with values and returns its Deployment's Pod.
func renderPod(t *testing.T, dir, release string, values map[string]any) corev1.PodSpec {
	t.Helper()
	chrt, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := harness.RenderChart(chrt, release, "kbind", values)
	if err != nil {
		t.Fatal(err)
	}
	d, err := harness.Deployment(rel.Manifest, release)
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec
}

func TestKubeletRunOfTheCharts(t *testing.T) {
	konnector := renderPod(t, "../../charts/konnector", "konnector", map[string]any{"rbac": map[string]any{"boundResourceGroups": []any{"example.org"}}})
	run, err := kubeletRun(konnector, "konnector", testInput)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(run.Args, " ")
	for _, want := range []string{
		"run -d --name kbind-konnector --network host",
		"--user 65532:65532", "--read-only", "--security-opt no-new-privileges", "--cap-drop ALL",
		"--memory 536870912", "--cpu-shares 51",
		"-e KUBERNETES_SERVICE_HOST=127.0.0.1 -e KUBERNETES_SERVICE_PORT=6443",
		"-v /tmp/sa:/var/run/secrets/kubernetes.io/serviceaccount:ro",
		"ghcr.io/kbind/konnector:0.1.0 --namespace=kbind",
		"--metrics-bind-address=:8080 --health-probe-bind-address=:8081",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("docker %s\nlacks %q", got, want)
		}
	}
	if run.Ports["probes"] != 8081 || run.Ports["metrics"] != 8080 || run.GracePeriodSeconds != 30 {
		t.Errorf("ports %v, grace %d", run.Ports, run.GracePeriodSeconds)
	}

	backend := renderPod(t, "../../charts/backend", "backend", map[string]any{"metrics": map[string]any{"port": 9090}})
	run, err = kubeletRun(backend, "backend", testInput)
	if err != nil {
		t.Fatal(err)
	}
	got = strings.Join(run.Args, " ")
	for _, want := range []string{"--memory 268435456", "--cpu-shares 20", "ghcr.io/kbind/backend:0.1.0 --namespace=kbind", "--metrics-bind-address=:9090"} {
		if !strings.Contains(got, want) {
			t.Errorf("docker %s\nlacks %q", got, want)
		}
	}
	if run.Ports["metrics"] != 9090 {
		t.Errorf("ports %v", run.Ports)
	}
}

func TestKubeletRun(t *testing.T) {
	base := func() corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img", Args: []string{"--a"}}}}
	}
	cases := []struct {
		name    string
		mutate  func(*corev1.PodSpec)
		want    []string // substrings of the command line
		wantErr string
	}{
		{"plain", func(*corev1.PodSpec) {}, []string{"img --a"}, ""},
		{"command becomes the entrypoint", func(p *corev1.PodSpec) { p.Containers[0].Command = []string{"/bin", "x"} },
			[]string{"--entrypoint /bin img x --a"}, ""},
		{"container user wins", func(p *corev1.PodSpec) {
			p.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1), RunAsGroup: ptr.To[int64](2)}
			p.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](3)}
		}, []string{"--user 3:2"}, ""},
		{"downward API env", func(p *corev1.PodSpec) {
			p.Containers[0].Env = []corev1.EnvVar{{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}, {Name: "X", Value: "y"}}
		}, []string{"-e NS=kbind", "-e X=y"}, ""},
		{"cpu limit", func(p *corev1.PodSpec) {
			p.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
		}, []string{"--cpus 0.500"}, ""},
		{"tiny cpu request", func(p *corev1.PodSpec) {
			p.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")}
		}, []string{"--cpu-shares 2"}, ""},
		{"no token mount", func(p *corev1.PodSpec) { p.AutomountServiceAccountToken = ptr.To(false) }, nil, ""},
		{"grace period", func(p *corev1.PodSpec) { p.TerminationGracePeriodSeconds = ptr.To[int64](5) }, nil, ""},
		{"unconfined seccomp", func(p *corev1.PodSpec) {
			p.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, []string{"--security-opt seccomp=unconfined"}, ""},
		{"non-root without a user", func(p *corev1.PodSpec) {
			p.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
		}, nil, "runAsNonRoot without runAsUser"},
		{"non-root as root", func(p *corev1.PodSpec) {
			p.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)}
		}, nil, "the kubelet refuses"},
		{"privileged", func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}, nil, "privileged"},
		{"secret env", func(p *corev1.PodSpec) {
			p.Containers[0].Env = []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}
		}, nil, "env S"},
		{"volumes", func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{{Name: "v"}} }, nil, "volumes are not reproduced"},
		{"gpu limit", func(p *corev1.PodSpec) {
			p.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		}, nil, "example.com/gpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := base()
			tc.mutate(&pod)
			run, err := kubeletRun(pod, "c", testInput)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(run.Args, " ")
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("docker %s\nlacks %q", got, w)
				}
			}
			if mounted := strings.Contains(got, serviceAccountDir); mounted == (pod.AutomountServiceAccountToken != nil) {
				t.Errorf("token mounted %v with automount %v", mounted, pod.AutomountServiceAccountToken)
			}
			if want := ptr.Deref(pod.TerminationGracePeriodSeconds, 30); run.GracePeriodSeconds != want {
				t.Errorf("grace %d, want %d", run.GracePeriodSeconds, want)
			}
		})
	}
	if _, err := kubeletRun(base(), "other", testInput); err == nil {
		t.Error("a missing container is an error")
	}
}

func TestProbePort(t *testing.T) {
	ports := map[string]int32{"probes": 8081}
	if p, err := probePort(intstr.FromString("probes"), ports); err != nil || p != 8081 {
		t.Errorf("named: %d %v", p, err)
	}
	if p, err := probePort(intstr.FromInt32(9), ports); err != nil || p != 9 {
		t.Errorf("number: %d %v", p, err)
	}
	if _, err := probePort(intstr.FromString("nope"), ports); err == nil {
		t.Error("an unknown name is an error")
	}
}
