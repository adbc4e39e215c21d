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

package faults

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// What the suite reads of a process's resources — its metrics endpoint,
// /proc/<pid>/status and /proc/<pid>/net/tcp — parsed by pure functions so
// that the parsing has its own tests.

// MetricSum is the sum of the samples of the counter or gauge name in a
// Prometheus text exposition whose labels include every pair of match;
// found is false when no sample matches.
func MetricSum(exposition, name string, match map[string]string) (sum float64, found bool, err error) {
	by, err := MetricSumBy(exposition, name, match, "")
	if err != nil {
		return 0, false, err
	}
	sum, found = by[""]
	return sum, found, nil
}

// MetricSumBy is MetricSum per value of the label by ("" sums every
// matching sample under the key "").
func MetricSumBy(exposition, name string, match map[string]string, by string) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(exposition))
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	out := map[string]float64{}
	for _, m := range families[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if !includes(labels, match) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			out[labels[by]] += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			out[labels[by]] += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			out[labels[by]] += m.GetUntyped().GetValue()
		}
	}
	return out, nil
}

func includes(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// VmRSS is the resident set size in bytes from a /proc/<pid>/status.
func VmRSS(status string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS %q: %w", fields[0], err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS in the process status")
}

// EstablishedTo counts the established TCP connections in a
// /proc/<pid>/net/tcp (or tcp6) table whose remote port is port and whose
// socket inode is in inodes (the process's own sockets: the table lists
// every socket of the network namespace).
func EstablishedTo(table string, inodes map[string]bool, port int) (int, error) {
	const established = "01"
	n := 0
	sc := bufio.NewScanner(strings.NewReader(table))
	for first := true; sc.Scan(); first = false {
		fields := strings.Fields(sc.Text())
		if first || len(fields) < 10 {
			continue // the header
		}
		remote, state, inode := fields[2], fields[3], fields[9]
		_, hexPort, ok := strings.Cut(remote, ":")
		if !ok {
			return 0, fmt.Errorf("unexpected remote address %q", remote)
		}
		p, err := strconv.ParseInt(hexPort, 16, 32)
		if err != nil {
			return 0, fmt.Errorf("remote port %q: %w", hexPort, err)
		}
		if int(p) == port && state == established && inodes[inode] {
			n++
		}
	}
	return n, sc.Err()
}

// SocketInode is the inode of a /proc/<pid>/fd link target
// "socket:[12345]"; ok is false for anything else.
func SocketInode(link string) (string, bool) {
	inode, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(inode, "]"), true
}
