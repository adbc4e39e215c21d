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
	"sync"
	"syscall"
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

// processKonnector runs the built binary as a host process against the
// consumer, impersonating the chart's ServiceAccount. Its log goes to
// konnector.log in the suite directory, across restarts.
type processKonnector struct {
	bin, kubeconfig, logPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	logFile *os.File
	mark    int64
}

func newProcessKonnector(ctx context.Context, s *Suite) (*processKonnector, error) {
	k := &processKonnector{
		bin:        filepath.Join(s.Dir, "bin", "konnector"),
		kubeconfig: filepath.Join(s.Dir, "konnector-as-serviceaccount.kubeconfig"),
		logPath:    filepath.Join(s.Dir, "konnector.log"),
	}
	if err := Build(ctx, k.bin, "github.com/kbind/kbind/konnector/cmd/konnector"); err != nil {
		return nil, err
	}
	// The suite kubeconfig's current context is the consumer.
	if err := WriteImpersonating(s.Kubeconfig, k.kubeconfig, ServiceAccount); err != nil {
		return nil, err
	}
	var err error
	if k.logFile, err = os.OpenFile(k.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *processKonnector) Start(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd != nil {
		return errors.New("konnector already running")
	}
	probe, err := LoopbackAddr()
	if err != nil {
		return err
	}
	args := append([]string{"--kubeconfig", k.kubeconfig, "--namespace", Namespace,
		"--metrics-bind-address", "0", "--health-probe-bind-address", probe}, KonnectorArgs...)
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

func (k *processKonnector) Kill(context.Context) error {
	return k.end(syscall.SIGKILL, 0)
}

func (k *processKonnector) Stop(context.Context) {
	_ = k.end(syscall.SIGTERM, 20*time.Second)
}

// end signals the process and waits for it; after grace it is killed.
func (k *processKonnector) end(sig syscall.Signal, grace time.Duration) error {
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

func (k *processKonnector) Mark(note string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if st, err := k.logFile.Stat(); err == nil {
		k.mark = st.Size()
	}
	fmt.Fprintln(k.logFile, note)
}

func (k *processKonnector) LogsSinceMark(context.Context) string {
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
