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

package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// liveHeap forces a garbage collection in the konnector (by reading its
// heap profile, which the runtime takes after a GC when asked) and returns
// the bytes its heap then holds (go_memstats_heap_alloc_bytes): the memory
// the synced state really needs, without the garbage a peak resident set
// also counts. With dir set, the profile is kept there as heap-<label>.pb.gz
// for `go tool pprof`.
func liveHeap(pprofAddr, metricsAddr, dir, label string) (float64, error) {
	if err := heapProfile(pprofAddr, dir, label); err != nil {
		return 0, err
	}
	return scrapeGauge(metricsAddr, "go_memstats_heap_alloc_bytes")
}

// heapProfile reads the konnector's heap profile after a garbage
// collection and, with dir set, keeps it there as heap-<label>.pb.gz.
func heapProfile(pprofAddr, dir, label string) error {
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Get("http://" + pprofAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return fmt.Errorf("reading the konnector's heap profile: %w", err)
	}
	defer resp.Body.Close()
	profile, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading the konnector's heap profile: %w", err)
	}
	if dir == "" {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "heap-"+label+".pb.gz"), profile, 0o644)
}

// scrapeGauge reads one unlabelled metric of the konnector.
func scrapeGauge(metricsAddr, name string) (float64, error) {
	value, found := 0.0, false
	err := scrapeMetrics(metricsAddr, func(line string) error {
		v, ok := strings.CutPrefix(line, name+" ")
		if !ok || found {
			return nil
		}
		var err error
		value, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
		found = true
		return err
	})
	if err == nil && !found {
		err = fmt.Errorf("the konnector serves no %s", name)
	}
	return value, err
}

// syncedState reads, from the konnector's metrics, how many syncers run
// with their informers synced (kbind_syncer_ready) and how many objects
// their workqueues still hold (workqueue_depth of the queues named
// "<connection>/<Kind.group>" of the bench's group).
func syncedState(metricsAddr, group string) (ready int, depth float64, err error) {
	err = scrapeMetrics(metricsAddr, func(line string) error {
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil
		}
		v, perr := strconv.ParseFloat(fields[1], 64)
		if perr != nil {
			return nil
		}
		switch {
		case strings.HasPrefix(line, "kbind_syncer_ready{") && v == 1:
			ready++
		case strings.HasPrefix(line, "workqueue_depth{") && strings.Contains(line, "."+group+`"`):
			depth += v
		}
		return nil
	})
	return ready, depth, err
}

// cpuProfile, with dir set, records the konnector's CPU profile in the
// background, in windows of d one after another, as cpu-<label>-<i>.pb.gz,
// until stop is called (once or more): the whole measured run, not its start only (go tool
// pprof merges the files it is given). stop waits for the last window,
// which ends up to d later.
func cpuProfile(pprofAddr, dir, label string, d time.Duration) (stop func()) {
	done := make(chan struct{})
	if dir == "" {
		close(done)
		return func() {}
	}
	stopping := make(chan struct{})
	go func() {
		defer close(done)
		client := &http.Client{Timeout: d + time.Minute}
		for i := 1; ; i++ {
			if err := cpuWindow(client, pprofAddr, filepath.Join(dir, fmt.Sprintf("cpu-%s-%02d.pb.gz", label, i)), d); err != nil {
				fmt.Fprintf(os.Stderr, "bench: CPU profile: %v\n", err)
				return
			}
			select {
			case <-stopping:
				return
			default:
			}
		}
	}()
	return sync.OnceFunc(func() { close(stopping); <-done })
}

// cpuWindow writes the konnector's CPU profile of the next d to file.
func cpuWindow(client *http.Client, pprofAddr, file string, d time.Duration) error {
	resp, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}
