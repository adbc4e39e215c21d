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

package doctor

import (
	"fmt"
	"strings"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// docImport is where importing the provider's objects is explained.
const docImport = "docs/import.md"

// importFindings explains each binding entry that imports the provider's
// own objects (providerObjects: Import): a Note with how many copies it
// holds (instances.imported, counted apart from the consumer's own
// objects) and how to list them or take one over.
func importFindings(bindings []BindingState, cmd Commands) []Finding {
	var out []Finding
	for _, b := range bindings {
		for _, api := range b.Spec.APIs {
			if api.ProviderObjects != kbindv1alpha1.ProviderObjectsImport {
				continue
			}
			name := api.ConsumerName()
			evidence := "not bound yet: no count"
			for _, bound := range b.Status.BoundAPIs {
				if bound.Name == name && bound.Instances != nil {
					in := bound.Instances
					evidence = fmt.Sprintf("%d imported of %d object(s) in scope (%d synced, %d pending, %d failed)", in.Imported, in.Total, in.Synced, in.Pending, in.Failed)
				}
			}
			out = append(out, Finding{
				Check: "binding.imports", Severity: SeverityNote, Object: b.object(), Field: "spec.apis[" + name + "].providerObjects",
				Problem: fmt.Sprintf("%s imports the provider's own objects of %s through Connection %s: they appear here owned by the provider (%s: %s), follow it, and edits to them are reverted",
					b.Kind, name, b.Spec.ConnectionRef.Name, kbindv1alpha1.OwnerAnnotation, kbindv1alpha1.OwnerProvider),
				Evidence: evidence,
				Fix: fmt.Sprintf("%s get %s -A -o custom-columns='NAMESPACE:.metadata.namespace,NAME:.metadata.name,OWNER:.metadata.annotations.%s'   # the imported ones say provider\n"+
					"# to make one the consumer's: kubectl kbind adopt %s/<name> -n <namespace>",
					cmd.Consumer, name, strings.ReplaceAll(kbindv1alpha1.OwnerAnnotation, ".", `\.`), name),
				Doc: docImport,
			})
		}
	}
	return out
}
