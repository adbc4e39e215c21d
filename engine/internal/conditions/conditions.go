// Package conditions sets metav1.Conditions the way every kbind status
// writer must: messages within the API server's limit (a longer one makes
// the whole status write fail, forever), the observed generation, and the
// transition time kept when nothing changed.
package conditions

import (
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxMessageLength is the API server's limit on a condition message.
const MaxMessageLength = 32768

// Truncate keeps msg within MaxMessageLength (on a rune boundary), marking
// the cut with "...".
func Truncate(msg string) string {
	if len(msg) <= MaxMessageLength {
		return msg
	}
	cut := MaxMessageLength - len("...")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}

// Set sets c on conds with a truncated message and the generation as
// observedGeneration; an unchanged condition keeps its transition time.
func Set(conds *[]metav1.Condition, c metav1.Condition, generation int64) {
	c.Message = Truncate(c.Message)
	c.ObservedGeneration = generation
	meta.SetStatusCondition(conds, c)
}
