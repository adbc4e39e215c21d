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

package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Konnector is the konnector under test.
type Konnector interface {
	// Start starts it (after Kill: brings it back) and waits until /readyz
	// passes.
	Start(ctx context.Context) error
	// Kill ends it with SIGKILL (kind: force-deletes the Pod), no
	// graceful shutdown.
	Kill(ctx context.Context) error
	// Stop ends it gracefully.
	Stop(ctx context.Context)
	// Mark notes a point in the log, e.g. a feature starting.
	Mark(note string)
	// LogsSinceMark is the log since the last Mark.
	LogsSinceMark(ctx context.Context) string
}

// ServiceAccount is the chart's ServiceAccount the local konnector
// impersonates, so the chart's RBAC is what it gets.
const ServiceAccount = "system:serviceaccount:" + Namespace + ":" + Release

// Process is a built konnector binary run as a host process: its log goes
// to one file across restarts, and each Start picks a free probe address
// and waits for /readyz. The e2e suite's local konnector is one (against
// the consumer, impersonating the chart's ServiceAccount); the fault suite
// runs one with its metrics and pprof endpoints on.
type Process struct {
	bin, logPath string
	args         []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	logFile *os.File
	mark    int64
}

var _ Konnector = &Process{}

// NewProcess prepares the binary bin run with args (all but
// --health-probe-bind-address, which Start adds), appending its output to
// logPath.
func NewProcess(bin, logPath string, args ...string) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the konnector log: %w", err)
	}
	return &Process{bin: bin, logPath: logPath, args: args, logFile: f}, nil
}

func newProcessKonnector(ctx context.Context, s *Suite) (*Process, error) {
	bin := filepath.Join(s.Dir, "bin", "konnector")
	kubeconfig := filepath.Join(s.Dir, "konnector-as-serviceaccount.kubeconfig")
	if err := Build(ctx, bin, "github.com/kbind/kbind/konnector/cmd/konnector"); err != nil {
		return nil, err
	}
	// The suite kubeconfig's current context is the consumer.
	if err := WriteImpersonating(s.Kubeconfig, kubeconfig, ServiceAccount); err != nil {
		return nil, err
	}
	return NewProcess(bin, filepath.Join(s.Dir, "konnector.log"), append([]string{"--kubeconfig", kubeconfig, "--namespace", Namespace,
		"--metrics-bind-address", "0"}, KonnectorArgs...)...)
}

// LogPath is the file the konnector's output goes to.
func (k *Process) LogPath() string { return k.logPath }

// Start starts the konnector and waits until /readyz passes.
func (k *Process) Start(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd != nil {
		return errors.New("konnector already running")
	}
	probe, err := LoopbackAddr()
	if err != nil {
		return err
	}
	args := append(append([]string(nil), k.args...), "--health-probe-bind-address", probe)
	cmd := exec.Command(k.bin, args...)
	cmd.Stdout, cmd.Stderr = k.logFile, k.logFile
	fmt.Fprintf(k.logFile, "=== konnector %v\n", args)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the konnector: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	k.cmd, k.done = cmd, done
	ready := "http://" + probe + "/readyz"
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("the konnector exited: %v", cmd.ProcessState)
		default:
		}
		resp, err := http.Get(ready)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("konnector not ready: %w (log: %s)", err, k.logPath)
	}
	return nil
}

// Kill ends the konnector with SIGKILL.
func (k *Process) Kill(context.Context) error {
	return k.end(syscall.SIGKILL, 0)
}

// Stop ends the konnector with SIGTERM, SIGKILL after 20 s.
func (k *Process) Stop(context.Context) {
	_ = k.end(syscall.SIGTERM, 20*time.Second)
}

// end signals the process and waits for it; after grace it is killed.
func (k *Process) end(sig syscall.Signal, grace time.Duration) error {
	if k == nil { // never started: a setup failed before it
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd == nil {
		return nil
	}
	if err := k.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	if grace > 0 {
		select {
		case <-k.done:
		case <-time.After(grace):
			_ = k.cmd.Process.Kill()
		}
	}
	<-k.done
	fmt.Fprintf(k.logFile, "=== konnector ended (%v): %v\n", sig, k.cmd.ProcessState)
	k.cmd, k.done = nil, nil
	return nil
}

// Mark writes note into the log and remembers where it is.
func (k *Process) Mark(note string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if st, err := k.logFile.Stat(); err == nil {
		k.mark = st.Size()
	}
	fmt.Fprintln(k.logFile, note)
}

// LogsSinceMark is the log since the last Mark.
func (k *Process) LogsSinceMark(context.Context) string {
	k.mu.Lock()
	mark := k.mark
	k.mu.Unlock()
	f, err := os.Open(k.logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if _, err := f.Seek(mark, io.SeekStart); err != nil {
		return err.Error()
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// PID is the running konnector's process id; 0 when it is not running.
func (k *Process) PID() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd == nil {
		return 0
	}
	return k.cmd.Process.Pid
}

// Exited reports whether the konnector ended without Kill or Stop.
func (k *Process) Exited() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd == nil {
		return false
	}
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// LoopbackAddr returns a 127.0.0.1 address nothing listens on (it was
// free a moment ago).
func LoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// StartProcessT is NewProcess and Start for a test: bin runs with args,
// its output appended to logPath, until the test ends; when the test
// failed, the log's path and its last 200 lines are logged.
func StartProcessT(t testing.TB, bin, logPath string, args ...string) *Process {
	t.Helper()
	k, err := NewProcess(bin, logPath, args...)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.Stop(context.Background())
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			if len(lines) > 200 {
				lines = lines[len(lines)-200:]
			}
			t.Logf("%s's log (%s), its end:\n%s", filepath.Base(bin), logPath, strings.Join(lines, "\n"))
		}
	})
	return k
}
