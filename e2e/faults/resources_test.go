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

import "testing"

func TestMetricSum(t *testing.T) {
	const exposition = `# HELP rest_client_requests_total Number of HTTP requests.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:1000",method="GET"} 7
rest_client_requests_total{code="200",host="127.0.0.1:1000",method="PUT"} 2
rest_client_requests_total{code="200",host="127.0.0.1:2000",method="GET"} 5
# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 123
`
	for _, tc := range []struct {
		name, metric string
		match        map[string]string
		want         float64
		found        bool
	}{
		{name: "a gauge without labels", metric: "go_goroutines", want: 123, found: true},
		{name: "every series of a counter", metric: "rest_client_requests_total", want: 14, found: true},
		{name: "the series of one host", metric: "rest_client_requests_total", match: map[string]string{"host": "127.0.0.1:1000"}, want: 9, found: true},
		{name: "two labels", metric: "rest_client_requests_total", match: map[string]string{"host": "127.0.0.1:1000", "method": "PUT"}, want: 2, found: true},
		{name: "no series matches", metric: "rest_client_requests_total", match: map[string]string{"host": "127.0.0.1:3000"}},
		{name: "no such metric", metric: "leader_election_master_status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := MetricSum(exposition, tc.metric, tc.match)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || found != tc.found {
				t.Errorf("got %v (found %v), want %v (found %v)", got, found, tc.want, tc.found)
			}
		})
	}
	by, err := MetricSumBy(exposition, "rest_client_requests_total", map[string]string{"code": "200"}, "host")
	if err != nil || len(by) != 2 || by["127.0.0.1:1000"] != 9 || by["127.0.0.1:2000"] != 5 {
		t.Errorf("by host: %v, %v", by, err)
	}
	if _, _, err := MetricSum("not a metric line {", "x", nil); err == nil {
		t.Error("garbage parsed without an error")
	}
}

func TestVmRSS(t *testing.T) {
	got, err := VmRSS("Name:\tkonnector\nVmPeak:\t  900000 kB\nVmRSS:\t   51200 kB\nThreads:\t12\n")
	if err != nil || got != 51200*1024 {
		t.Errorf("got %d, %v; want %d", got, err, 51200*1024)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\n", "VmRSS:\tmany kB\n"} {
		if _, err := VmRSS(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestEstablishedTo(t *testing.T) {
	// Port 0x1F90 = 8080, 0x0050 = 80; state 01 established, 0A listen.
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:A000 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 111 1 0 20 4 30 10 -1
   1: 0100007F:A001 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1
   2: 0100007F:A002 0100007F:1F90 06 00000000:00000000 00:00000000 00000000     0        0 333 1 0 20 4 30 10 -1
   3: 0100007F:A003 0100007F:0050 01 00000000:00000000 00:00000000 00000000     0        0 444 1 0 20 4 30 10 -1
   4: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1 0 20 4 30 10 -1
`
	for _, tc := range []struct {
		name   string
		inodes []string
		port   int
		want   int
	}{
		{name: "the process's established connections to the port", inodes: []string{"111", "222", "333", "444"}, port: 8080, want: 2},
		{name: "another process's sockets do not count", inodes: []string{"111"}, port: 8080, want: 1},
		{name: "another port", inodes: []string{"111", "444"}, port: 80, want: 1},
		{name: "a listening socket is no connection", inodes: []string{"555"}, port: 0, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inodes := map[string]bool{}
			for _, i := range tc.inodes {
				inodes[i] = true
			}
			got, err := EstablishedTo(table, inodes, tc.port)
			if err != nil || got != tc.want {
				t.Errorf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestSocketInode(t *testing.T) {
	if got, ok := SocketInode("socket:[12345]"); !ok || got != "12345" {
		t.Errorf("got %q, %v", got, ok)
	}
	for _, other := range []string{"/dev/null", "pipe:[77]", "anon_inode:[eventpoll]"} {
		if _, ok := SocketInode(other); ok {
			t.Errorf("%q read as a socket", other)
		}
	}
}
