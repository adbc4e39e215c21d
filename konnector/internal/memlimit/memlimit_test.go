package memlimit

import "testing"

func TestFromCgroup(t *testing.T) {
	for content, want := range map[string]int64{
		"536870912\n":           536870912, // v2 or v1: 512Mi
		"max\n":                 0,         // v2: none
		"9223372036854771712\n": 0,         // v1: none
		"":                      0,
		"garbage":               0,
		"-1":                    0,
	} {
		if got := FromCgroup(content); got != want {
			t.Errorf("FromCgroup(%q) = %d, want %d", content, got, want)
		}
	}
}
