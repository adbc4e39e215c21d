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

package consumers

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// Header is the table's header line.
var Header = []string{"NAME", "MODE", "NAMESPACE/PREFIX", "HEARTBEAT", "KONNECTOR", "APIS", "OBJECTS", "TOKEN", "STATUS"}

// Row is one consumer's line of the table.
func Row(c Consumer, now time.Time) []string {
	return []string{c.Name, orDash(c.Mode), orDash(c.Namespace), HeartbeatCell(c.Heartbeat, now), konnectorCell(c.KonnectorVersions),
		strconv.Itoa(len(c.APIs)), objectsCell(c.Objects), TokenCell(c.Token, now), StatusCell(c)}
}

// WriteTable writes the table of l, and its problems below it.
func WriteTable(w io.Writer, l List, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if len(l.Consumers) == 0 {
		fmt.Fprintln(tw, "No consumers on this cluster (kubectl kbind grant onboards one).")
	} else {
		fmt.Fprintln(tw, strings.Join(Header, "\t"))
		for _, c := range l.Consumers {
			fmt.Fprintln(tw, strings.Join(Row(c, now), "\t"))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeProblems(w, l)
}

func writeProblems(w io.Writer, l List) error {
	var b strings.Builder
	for _, p := range l.Problems {
		fmt.Fprintf(&b, "problem: %s\n", p)
	}
	for _, c := range l.Consumers {
		for _, p := range c.Problems {
			fmt.Fprintf(&b, "problem: consumer %s: %s\n", c.Name, p)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// HeartbeatCell is the age of the newest renewal, "(stale)" when no Lease
// renews, "-" without Leases.
func HeartbeatCell(h Heartbeat, now time.Time) string {
	if h.LastRenewal == nil {
		if h.Stale {
			return "stale"
		}
		return "-"
	}
	age := duration.HumanDuration(max(now.Sub(*h.LastRenewal), 0))
	if h.Stale {
		return age + " (stale)"
	}
	return age
}

func konnectorCell(versions []string) string {
	if len(versions) == 0 {
		return "-"
	}
	return strings.Join(versions, ",")
}

func objectsCell(n *int) string {
	if n == nil {
		return "?"
	}
	return strconv.Itoa(*n)
}

// TimeFormat is how the table prints an expiry: UTC, to the minute.
const TimeFormat = "2006-01-02T15:04Z"

// TokenCell is the expiry of a credential that does not renew ("expired"
// before it when past), "renews", or "-" when no konnector said.
func TokenCell(t Token, now time.Time) string {
	switch {
	case t.ExpiresAt != nil && !t.ExpiresAt.After(now):
		return "expired " + t.ExpiresAt.UTC().Format(TimeFormat)
	case t.ExpiresAt != nil:
		return t.ExpiresAt.UTC().Format(TimeFormat)
	case t.Renews:
		return "renews"
	}
	return "-"
}

// StatusCell is the status, and for a revoked consumer what is left.
func StatusCell(c Consumer) string {
	if c.Status == StatusRevoked && len(c.Left) > 0 {
		return string(c.Status) + " (left: " + strings.Join(c.Left, ", ") + ")"
	}
	if c.NeverGranted {
		return string(c.Status) + " (never granted)"
	}
	return string(c.Status)
}

// WriteDetail writes one consumer in full.
func WriteDetail(w io.Writer, c Consumer, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "%s:\t%s\n", name, value) }
	field("Name", c.Name)
	field("Status", StatusCell(c))
	isolation := orDash(c.Mode)
	if c.Namespace != "" {
		isolation += ", namespace " + c.Namespace
	}
	if c.Prefix != "" {
		isolation += ", prefix " + c.Prefix
	}
	field("Isolation", isolation)
	field("ServiceAccount", orDash(c.ServiceAccount))
	field("APIs", orDash(strings.Join(c.APIs, ", ")))
	field("Related kinds", orDash(strings.Join(c.Related, ", ")))
	hb := HeartbeatCell(c.Heartbeat, now)
	if r := c.Heartbeat.LastRenewal; r != nil {
		hb = duration.HumanDuration(max(now.Sub(*r), 0)) + " ago, at " + r.UTC().Format(time.RFC3339)
		if c.Heartbeat.Stale {
			hb += " (stale)"
		}
	}
	field("Heartbeat", hb)
	field("Konnector", konnectorCell(c.KonnectorVersions))
	field("Token", TokenCell(c.Token, now))
	field("Objects", objectsCell(c.Objects))
	if err := tw.Flush(); err != nil {
		return err
	}

	section := func(title string, header []string, rows [][]string) error {
		fmt.Fprintf(w, "\n%s:\n", title)
		if len(rows) == 0 {
			_, err := fmt.Fprintln(w, "  none")
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
		fmt.Fprintln(tw, "  "+strings.Join(header, "\t"))
		for _, r := range rows {
			fmt.Fprintln(tw, "  "+strings.Join(r, "\t"))
		}
		return tw.Flush()
	}
	var rbac [][]string
	for _, r := range c.Granted {
		rbac = append(rbac, []string{r.Kind, orDash(r.Namespace), r.Name})
	}
	if err := section("Granted objects", []string{"KIND", "NAMESPACE", "NAME"}, rbac); err != nil {
		return err
	}
	var leases [][]string
	for _, l := range c.Leases {
		renewed := "-"
		if l.RenewTime != nil {
			renewed = l.RenewTime.UTC().Format(time.RFC3339)
			if l.Stale {
				renewed += " (stale)"
			}
		}
		expiry := "-"
		switch {
		case l.CredentialRenews:
			expiry = "renews"
		case l.CredentialExpiry != nil:
			expiry = l.CredentialExpiry.UTC().Format(TimeFormat)
		}
		leases = append(leases, []string{l.Namespace + "/" + l.Name, orDash(l.Holder), renewed, orDash(l.Connection), orDash(l.KonnectorVersion),
			orDash(l.APIVersion), orDash(l.ProviderUser), orDash(l.CredentialKind), expiry})
	}
	if err := section("Leases", []string{"LEASE", "HOLDER", "RENEWED", "CONNECTION", "KONNECTOR", "API", "PROVIDER USER", "CREDENTIAL", "EXPIRES"}, leases); err != nil {
		return err
	}
	var copies [][]string
	for _, cc := range c.Copies {
		copies = append(copies, []string{cc.API, orDash(cc.Namespace), strconv.Itoa(cc.Count)})
	}
	if err := section("Provider copies", []string{"API", "NAMESPACE", "COUNT"}, copies); err != nil {
		return err
	}
	if len(c.Problems) > 0 {
		fmt.Fprintln(w, "\nProblems:")
		for _, p := range c.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
