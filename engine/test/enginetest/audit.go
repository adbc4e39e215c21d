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

package enginetest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/kbind/kbind/engine/test/testenv"
)

// auditPolicy records one event per request (at RequestReceived: the URI
// with its query is all the tests look at) on Secrets and ConfigMaps, and
// nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted, ResponseComplete, Panic]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: [secrets, configmaps]
- level: None
`

// Audit names the audit logs of a pair started with AuditPair.
type Audit struct {
	ConsumerLog, ProviderLog string
}

// AuditPair writes an audit policy into dir and returns pair options that
// make both API servers log every Secret and ConfigMap request there.
func AuditPair(dir string) (testenv.PairOptions, Audit, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return testenv.PairOptions{}, Audit{}, fmt.Errorf("writing the audit policy: %w", err)
	}
	a := Audit{ConsumerLog: filepath.Join(dir, "consumer-audit.log"), ProviderLog: filepath.Join(dir, "provider-audit.log")}
	args := func(log string) map[string][]string {
		return map[string][]string{"audit-policy-file": {policy}, "audit-log-path": {log}, "audit-log-mode": {"blocking"}}
	}
	return testenv.PairOptions{ConsumerAPIServerArgs: args(a.ConsumerLog), ProviderAPIServerArgs: args(a.ProviderLog)}, a, nil
}

// AuditEvent is the part of an audit.k8s.io/v1 Event the tests read.
type AuditEvent struct {
	Verb       string `json:"verb"`
	UserAgent  string `json:"userAgent"`
	RequestURI string `json:"requestURI"`
	ObjectRef  *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
}

// Resource is the event's resource, "" when it has none.
func (e AuditEvent) Resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Resource
}

// Namespace is the event's namespace, "" for a cluster-wide request.
func (e AuditEvent) Namespace() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Namespace
}

// Query is the request's query parameters.
func (e AuditEvent) Query() url.Values {
	u, err := url.Parse(e.RequestURI)
	if err != nil {
		return url.Values{}
	}
	return u.Query()
}

// Selected says whether a list or watch carries a label or field selector.
func (e AuditEvent) Selected() bool {
	q := e.Query()
	return q.Get("labelSelector") != "" || q.Get("fieldSelector") != ""
}

// String is a one-line description for failure messages.
func (e AuditEvent) String() string {
	return fmt.Sprintf("%s %s (%s)", strings.ToUpper(e.Verb), e.RequestURI, e.UserAgent)
}

// ReadAudit reads every event of an audit log.
func ReadAudit(path string) ([]AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	defer f.Close()
	var lines [][]byte
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		lines = append(lines, append([]byte(nil), scanner.Bytes()...))
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	var out []AuditEvent
	for i, line := range lines {
		var e AuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			if i == len(lines)-1 {
				break // the API server is still writing it
			}
			return nil, fmt.Errorf("decoding audit event %d: %w", i+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}
