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

package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Component is a process of a local control plane that a fault test can
// stop and start again.
type Component string

// The restartable components.
const (
	APIServer Component = "kube-apiserver"
	Etcd      Component = "etcd"
)

// restarted is a component process started again by Start: envtest does
// not know it, so Cluster.Stop ends it before envtest removes the
// directories it runs on.
type restarted struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// StopComponent stops one process of the control plane gracefully (SIGTERM,
// SIGKILL after 30 s) and remembers its command line, so that
// StartComponent brings it back on the same ports, certificates and data.
// (envtest's own Stop removes the certificate and data directories; a
// restart on existing data needs the process itself.) Linux only: the
// process is found through /proc.
func (c *Cluster) StopComponent(comp Component) error {
	if _, ok := c.stopped[comp]; ok {
		return fmt.Errorf("%s of %s is already stopped", comp, c.Name)
	}
	pid, args, err := c.findProcess(comp)
	if err != nil {
		return err
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return fmt.Errorf("%s of %s (pid %d): %w", comp, c.Name, pid, err)
	}
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping %s of %s (pid %d): %w", comp, c.Name, pid, err)
	}
	gone := func(context.Context) (bool, error) {
		if r, ok := c.restarted[comp]; ok && r.cmd.Process.Pid == pid {
			select {
			case <-r.done:
				return true, nil
			default:
				return false, nil
			}
		}
		_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
		return os.IsNotExist(err), nil
	}
	ctx := context.Background()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, gone); err != nil {
		_ = proc.Signal(syscall.SIGKILL)
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, gone); err != nil {
			return fmt.Errorf("%s of %s (pid %d) did not end: %w", comp, c.Name, pid, err)
		}
	}
	delete(c.restarted, comp)
	c.stopped[comp] = args
	return nil
}

// StartComponent starts a component StopComponent stopped, with the same
// command line, and waits until it serves (etcd: /health; kube-apiserver:
// /readyz) for up to a minute.
func (c *Cluster) StartComponent(comp Component) error {
	args, ok := c.stopped[comp]
	if !ok {
		return fmt.Errorf("%s of %s is not stopped", comp, c.Name)
	}
	log, err := os.OpenFile(filepath.Join(c.Dir, string(comp)+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("opening the %s log of %s: %w", comp, c.Name, err)
	}
	c.logs = append(c.logs, log)
	fmt.Fprintf(log, "=== restarted by the test at %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s of %s again: %w", comp, c.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.restarted[comp] = restarted{cmd: cmd, done: done}
	delete(c.stopped, comp)
	return c.waitServing(comp, done)
}

// restartServingBound and readyCheckTimeout bound waitServing: an API
// server restarted under load (the provider of a thousand reconnecting
// consumers on a machine it shares with them) may take minutes to answer
// its readiness check, each answer seconds; a component that does not
// start at all still fails the check at once or times out in the end.
const (
	restartServingBound = 5 * time.Minute
	readyCheckTimeout   = 10 * time.Second
)

// waitServing polls the component's health endpoint until it passes.
func (c *Cluster) waitServing(comp Component, done chan struct{}) error {
	check := func(ctx context.Context) (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("%s of %s exited (log: %s)", comp, c.Name, filepath.Join(c.Dir, string(comp)+".log"))
		default:
		}
		if comp == Etcd {
			client := &http.Client{Timeout: 2 * time.Second}
			resp, err := client.Get(c.EtcdURL() + "/health")
			if err != nil {
				return false, nil
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		}
		cs, err := kubernetes.NewForConfig(c.Config)
		if err != nil {
			return false, err
		}
		_, err = cs.RESTClient().Get().AbsPath("/readyz").Timeout(readyCheckTimeout).DoRaw(ctx)
		return err == nil, nil
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, restartServingBound, true, check); err != nil {
		return fmt.Errorf("%s of %s not serving after a restart: %w", comp, c.Name, err)
	}
	return nil
}

// PID is the process id of one running component of the control plane
// (the bench reads its CPU time and memory from /proc).
func (c *Cluster) PID(comp Component) (int, error) {
	pid, _, err := c.findProcess(comp)
	return pid, err
}

// findProcess finds the component's process: a child of this process (or
// one StartComponent started) running the component's binary on this
// cluster's directory (etcd: --data-dir; kube-apiserver: --cert-dir).
func (c *Cluster) findProcess(comp Component) (int, []string, error) {
	if r, ok := c.restarted[comp]; ok {
		return r.cmd.Process.Pid, r.cmd.Args, nil
	}
	var marker string
	switch comp {
	case APIServer:
		marker = "--cert-dir=" + c.env.ControlPlane.APIServer.CertDir
	case Etcd:
		marker = "--data-dir=" + c.env.ControlPlane.Etcd.DataDir
	default:
		return 0, nil, fmt.Errorf("unknown component %q", comp)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, fmt.Errorf("listing processes: %w", err)
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err1 := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		raw, err2 := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err1 != nil || err2 != nil || parentPID(string(stat)) != self {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if matchesComponent(args, string(comp), marker) {
			return pid, args, nil
		}
	}
	return 0, nil, errors.New(string(comp) + " of " + c.Name + " is not running (no child process has " + marker + ")")
}

// parentPID reads the ppid field of a /proc/<pid>/stat line ("pid (comm)
// state ppid ..."; comm may hold spaces and parentheses).
func parentPID(stat string) int {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return -1
	}
	return ppid
}

// matchesComponent reports whether a command line runs the binary named
// binary with the argument marker.
func matchesComponent(args []string, binary, marker string) bool {
	if len(args) == 0 || filepath.Base(args[0]) != binary {
		return false
	}
	for _, a := range args[1:] {
		if a == marker {
			return true
		}
	}
	return false
}

// stopRestarted ends the processes StartComponent started (envtest only
// knows the first ones).
func (c *Cluster) stopRestarted() error {
	var errs []error
	// The API server first: it shuts down slowly without its etcd.
	for _, comp := range []Component{APIServer, Etcd} {
		r, ok := c.restarted[comp]
		if !ok {
			continue
		}
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.done
			errs = append(errs, fmt.Errorf("%s of %s did not stop in 30s and was killed", comp, c.Name))
		}
		delete(c.restarted, comp)
	}
	return errors.Join(errs...)
}

// EtcdURL is the client URL of the cluster's etcd (for a test that talks
// to etcd directly, e.g. to compact it).
func (c *Cluster) EtcdURL() string { return c.env.ControlPlane.Etcd.URL.String() }
