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

package patch

import (
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTruncate(t *testing.T) {
	cases := []struct {
		name string
		in   string
	}{
		{"short", "fine"},
		{"at the limit", strings.Repeat("a", MaxMessageLength)},
		{"over the limit", strings.Repeat("a", MaxMessageLength+1)},
		{"far over", strings.Repeat("refused; ", 10000)},
		{"multi-byte rune at the cut", strings.Repeat("a", MaxMessageLength-4) + strings.Repeat("é", 10)},
	}
	for _, tc := range cases {
		got := Truncate(tc.in)
		if len(got) > MaxMessageLength || !utf8.ValidString(got) {
			t.Errorf("%s: %d bytes, valid UTF-8 %v", tc.name, len(got), utf8.ValidString(got))
		}
		if len(tc.in) <= MaxMessageLength && got != tc.in {
			t.Errorf("%s: changed a message within the limit", tc.name)
		}
		if len(tc.in) > MaxMessageLength && !strings.HasSuffix(got, "...") {
			t.Errorf("%s: the cut is not marked", tc.name)
		}
	}
}

func TestSetCondition(t *testing.T) {
	var conds []metav1.Condition
	SetCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: strings.Repeat("x", 40000)}, 3)
	if len(conds) != 1 || len(conds[0].Message) > MaxMessageLength || conds[0].ObservedGeneration != 3 || conds[0].LastTransitionTime.IsZero() {
		t.Fatalf("conditions %+v", conds)
	}
	first := conds[0].LastTransitionTime
	SetCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: "other"}, 4)
	if conds[0].LastTransitionTime != first || conds[0].Message != "other" || conds[0].ObservedGeneration != 4 {
		t.Errorf("an unchanged status must keep its transition time: %+v", conds[0])
	}
}
