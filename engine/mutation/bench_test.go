package mutation

import "testing"

// BenchmarkApply is one set rule on a small object: the cost the syncer
// adds per object and direction for a binding with one rule. The figure is
// recorded in the package doc.
func BenchmarkApply(b *testing.B) {
	p, err := Compile(Up, []Rule{set(".spec.tenant", "object.metadata.namespace")})
	if err != nil {
		b.Fatal(err)
	}
	object := obj(b, consumerWidget)
	target := obj(b, `{"metadata": {"name": "team-a.w1"}, "spec": {"size": 3, "note": "text"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Apply(target, object, nil); err != nil {
			b.Fatal(err)
		}
	}
}
