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
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// serviceAccountDir is where the kubelet mounts a Pod's ServiceAccount
// token, CA and namespace (rest.InClusterConfig reads them there).
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// defaultGracePeriod is the kubelet's when a Pod sets none.
const defaultGracePeriod = 30

// podRun is what the kubelet would run for one container of a Pod, as a
// docker command line, and what the test needs to talk to it.
type podRun struct {
	// Args follow `docker`: run -d --name ... image args...
	Args []string
	// Ports are the container's named ports (host ports, with the host
	// network).
	Ports map[string]int32
	// GracePeriodSeconds is how long the kubelet waits after SIGTERM.
	GracePeriodSeconds int64
}

// runInput is the rest of what the kubelet knows: the Pod's identity and
// the API server it reaches through the kubernetes Service.
type runInput struct {
	Name, Namespace string
	// ServiceAccountDir is a host directory holding token, ca.crt and
	// namespace, mounted read-only at the in-cluster path.
	ServiceAccountDir string
	// APIHost and APIPort become KUBERNETES_SERVICE_HOST/PORT.
	APIHost string
	APIPort string
}

// kubeletRun turns container of pod into the docker command line that runs
// it as the kubelet would: its image, command and args, env, the security
// context (user and group, read-only root filesystem, dropped and added
// capabilities, no privilege escalation; seccomp RuntimeDefault is
// Docker's default profile), memory and CPU resources, the ServiceAccount
// mount and the in-cluster environment, on the host network (so container
// ports are host ports). What it cannot reproduce faithfully is an error,
// never silently dropped.
func kubeletRun(pod corev1.PodSpec, container string, in runInput) (podRun, error) {
	var c *corev1.Container
	for i := range pod.Containers {
		if pod.Containers[i].Name == container {
			c = &pod.Containers[i]
		}
	}
	if c == nil {
		return podRun{}, fmt.Errorf("the Pod has no container %q", container)
	}
	if len(pod.InitContainers) > 0 || len(pod.Volumes) > 0 || len(c.VolumeMounts) > 0 {
		return podRun{}, fmt.Errorf("init containers and volumes are not reproduced (container %q)", c.Name)
	}
	run := podRun{Ports: map[string]int32{}, GracePeriodSeconds: defaultGracePeriod}
	if pod.TerminationGracePeriodSeconds != nil {
		run.GracePeriodSeconds = *pod.TerminationGracePeriodSeconds
	}
	args := []string{"run", "-d", "--name", in.Name, "--network", "host"}

	sec, err := security(pod.SecurityContext, c.SecurityContext)
	if err != nil {
		return podRun{}, fmt.Errorf("container %q: %w", c.Name, err)
	}
	args = append(args, sec...)
	res, err := resources(c.Resources)
	if err != nil {
		return podRun{}, fmt.Errorf("container %q: %w", c.Name, err)
	}
	args = append(args, res...)

	env := []string{"KUBERNETES_SERVICE_HOST=" + in.APIHost, "KUBERNETES_SERVICE_PORT=" + in.APIPort}
	for _, e := range c.Env {
		v, err := envValue(e, in)
		if err != nil {
			return podRun{}, fmt.Errorf("container %q: %w", c.Name, err)
		}
		env = append(env, e.Name+"="+v)
	}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	if len(c.EnvFrom) > 0 {
		return podRun{}, fmt.Errorf("container %q: envFrom is not reproduced", c.Name)
	}
	automount := pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken
	if automount {
		args = append(args, "-v", in.ServiceAccountDir+":"+serviceAccountDir+":ro")
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 && p.HostPort != p.ContainerPort {
			return podRun{}, fmt.Errorf("container %q: hostPort %d differs from containerPort %d", c.Name, p.HostPort, p.ContainerPort)
		}
		if p.Name != "" {
			run.Ports[p.Name] = p.ContainerPort
		}
	}
	if c.WorkingDir != "" {
		args = append(args, "-w", c.WorkingDir)
	}
	rest := append([]string(nil), c.Args...)
	if len(c.Command) > 0 {
		args = append(args, "--entrypoint", c.Command[0])
		rest = append(append([]string(nil), c.Command[1:]...), c.Args...)
	}
	args = append(args, c.Image)
	run.Args = append(args, rest...)
	return run, nil
}

// security maps the Pod's and the container's security context (the
// container's fields win) to docker flags.
func security(pod *corev1.PodSecurityContext, c *corev1.SecurityContext) ([]string, error) {
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	if c == nil {
		c = &corev1.SecurityContext{}
	}
	out, err := userFlags(pod, c)
	if err != nil {
		return nil, err
	}
	if c.Privileged != nil && *c.Privileged {
		return nil, fmt.Errorf("privileged containers are not reproduced")
	}
	if c.ReadOnlyRootFilesystem != nil && *c.ReadOnlyRootFilesystem {
		out = append(out, "--read-only")
	}
	if c.AllowPrivilegeEscalation != nil && !*c.AllowPrivilegeEscalation {
		out = append(out, "--security-opt", "no-new-privileges")
	}
	out = append(out, capabilityFlags(c.Capabilities)...)
	seccomp := pod.SeccompProfile
	if c.SeccompProfile != nil {
		seccomp = c.SeccompProfile
	}
	flags, err := seccompFlags(seccomp)
	if err != nil {
		return nil, err
	}
	return append(out, flags...), nil
}

// userFlags maps runAsUser, runAsGroup and runAsNonRoot (the container's
// win over the Pod's) to docker's --user, refusing what the kubelet would
// refuse or what depends on the image's USER.
func userFlags(pod *corev1.PodSecurityContext, c *corev1.SecurityContext) ([]string, error) {
	user, group := pod.RunAsUser, pod.RunAsGroup
	if c.RunAsUser != nil {
		user = c.RunAsUser
	}
	if c.RunAsGroup != nil {
		group = c.RunAsGroup
	}
	nonRoot := (pod.RunAsNonRoot != nil && *pod.RunAsNonRoot) || (c.RunAsNonRoot != nil && *c.RunAsNonRoot)
	switch {
	case user == nil && nonRoot:
		// The kubelet would check the image's USER; the charts always
		// name the user, so insist on it here.
		return nil, fmt.Errorf("runAsNonRoot without runAsUser is not reproduced")
	case user == nil:
		return nil, nil
	case nonRoot && *user == 0:
		return nil, fmt.Errorf("runAsNonRoot with runAsUser 0: the kubelet refuses to start it")
	}
	u := strconv.FormatInt(*user, 10)
	if group != nil {
		u += ":" + strconv.FormatInt(*group, 10)
	}
	return []string{"--user", u}, nil
}

// capabilityFlags maps dropped and added capabilities to docker flags.
func capabilityFlags(caps *corev1.Capabilities) []string {
	if caps == nil {
		return nil
	}
	var out []string
	for _, d := range caps.Drop {
		out = append(out, "--cap-drop", string(d))
	}
	for _, a := range caps.Add {
		out = append(out, "--cap-add", string(a))
	}
	return out
}

// seccompFlags maps a seccomp profile to docker flags: RuntimeDefault is
// docker's default profile, Unconfined turns it off, a Localhost profile
// is not reproduced.
func seccompFlags(seccomp *corev1.SeccompProfile) ([]string, error) {
	if seccomp == nil {
		return nil, nil
	}
	switch seccomp.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		// Docker's default profile.
		return nil, nil
	case corev1.SeccompProfileTypeUnconfined:
		return []string{"--security-opt", "seccomp=unconfined"}, nil
	default:
		return nil, fmt.Errorf("seccomp profile %q is not reproduced", seccomp.Type)
	}
}

// resources maps the memory limit, CPU limit and CPU request to docker's
// cgroup flags the way the kubelet sets the cgroups (CPU shares: milli-CPU
// × 1024 / 1000, at least 2).
func resources(r corev1.ResourceRequirements) ([]string, error) {
	var out []string
	if m, ok := r.Limits[corev1.ResourceMemory]; ok {
		out = append(out, "--memory", strconv.FormatInt(m.Value(), 10))
	}
	if cpu, ok := r.Limits[corev1.ResourceCPU]; ok {
		out = append(out, "--cpus", strconv.FormatFloat(float64(cpu.MilliValue())/1000, 'f', 3, 64))
	}
	if cpu, ok := r.Requests[corev1.ResourceCPU]; ok {
		shares := cpu.MilliValue() * 1024 / 1000
		if shares < 2 {
			shares = 2
		}
		out = append(out, "--cpu-shares", strconv.FormatInt(shares, 10))
	}
	for name := range r.Limits {
		if name != corev1.ResourceMemory && name != corev1.ResourceCPU {
			return nil, fmt.Errorf("resource limit %q is not reproduced", name)
		}
	}
	return out, nil
}

// envValue is an env var's value: literal, or the Downward API fields the
// kubelet resolves from the Pod's identity.
func envValue(e corev1.EnvVar, in runInput) (string, error) {
	if e.ValueFrom == nil {
		return e.Value, nil
	}
	if f := e.ValueFrom.FieldRef; f != nil {
		switch f.FieldPath {
		case "metadata.name":
			return in.Name, nil
		case "metadata.namespace":
			return in.Namespace, nil
		}
	}
	return "", fmt.Errorf("env %s: only literal values and metadata.name/namespace field refs are reproduced", e.Name)
}

// probePort resolves a probe's port (a number or a container port's name).
func probePort(port intstr.IntOrString, ports map[string]int32) (int32, error) {
	if port.Type == intstr.Int {
		return port.IntVal, nil
	}
	p, ok := ports[port.StrVal]
	if !ok {
		return 0, fmt.Errorf("probe port %q names no container port", port.StrVal)
	}
	return p, nil
}
