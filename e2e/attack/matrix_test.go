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

package attack

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	kbindcrds "github.com/kbind/kbind/api/crds"
)

// The feature matrix (issue #51, docs/isolation.md#every-feature-against-every-actor):
// every field of the binding API that makes kbind read, write or delete is
// a feature; every feature is attacked by every actor, and every pair of
// features that can act on the same object or Secret is attacked
// together — or the entry says, in one line, why it cannot matter. The
// features come from the api types by reflection (with the enum values of
// the generated CRD schema), so a new field fails TestFeatureMatrix until
// it is classified here and attacked.

// target is what a feature reads, writes or deletes.
type target string

const (
	consumerObject target = "consumer object"
	providerCopy   target = "provider object"
	consumerSecret target = "consumer Secret/ConfigMap"
	providerSecret target = "provider Secret/ConfigMap"
	consumerCRD    target = "consumer CRD"
)

// feature is one capability of a binding (or of a consumer object's
// annotations) and what it acts on.
type feature struct {
	id, name string
	acts     []target
}

var features = []feature{
	{"bind", "bind an API (`apis[].name`, `connectionRef`): spec up, status down, conflicts", []target{consumerObject, providerCopy, consumerCRD}},
	{"routing", "routing one API through several Connections (bindings of one API through two Connections)", []target{consumerObject, providerCopy}},
	{"projection", "`apis[].projection`", []target{consumerCRD, consumerObject}},
	{"objectSelector", "`apis[].objectSelector`", []target{consumerObject, providerCopy}},
	{"namespaceSelector", "`namespaceSelector`", []target{consumerObject, providerCopy}},
	{"mutationsUp", "`apis[].mutations.up`", []target{consumerObject, providerCopy}},
	{"mutationsDown", "`apis[].mutations.down`", []target{providerCopy, consumerObject}},
	{"import", "`apis[].providerObjects: Import`", []target{consumerObject, providerCopy}},
	{"adopt", "hand-over to the consumer (`core.kbind.io/hand-over: consumer`, kubectl kbind adopt)", []target{consumerObject, providerCopy}},
	{"release", "hand-over to the provider (`core.kbind.io/hand-over: provider`, kubectl kbind release)", []target{consumerObject, providerCopy}},
	{"relatedUpSelector", "related `FromConsumer` by selector", []target{consumerSecret, providerSecret}},
	{"relatedUpReference", "related `FromConsumer` by reference", []target{consumerObject, providerCopy, consumerSecret, providerSecret}},
	{"relatedDownSelector", "related `FromProvider` by selector", []target{providerSecret, consumerSecret}},
	{"relatedDownReference", "related `FromProvider` by reference", []target{consumerObject, providerCopy, providerSecret, consumerSecret}},
	{"conflictAdopt", "`conflictPolicy: Adopt`", []target{providerCopy, consumerObject}},
	{"deletionPolicy", "deletion policies (`deletionPolicy`, `core.kbind.io/deletion-policy`)", []target{consumerObject, providerCopy}},
	{"metadata", "`metadata` (labels and annotations up)", []target{consumerObject, providerCopy}},
	{"providerEvents", "`providerEvents: Forward`", []target{consumerObject, providerCopy}},
	{"deletionProtection", "`deletionProtection` (the konnector chart's policy refuses deleting the binding)", []target{consumerObject, providerCopy, consumerCRD}},
}

// fieldFeatures classifies every field of BindingSpec (enum fields by
// value, "path=value") as the features it takes part in.
var fieldFeatures = map[string][]string{
	"spec.connectionRef.name":                        {"bind", "routing"},
	"spec.apis[].name":                               {"bind"},
	"spec.apis[].projection.group":                   {"projection"},
	"spec.apis[].projection.kind":                    {"projection"},
	"spec.apis[].projection.plural":                  {"projection"},
	"spec.apis[].projection.shortNames[]":            {"projection"},
	"spec.apis[].projection.categories[]":            {"projection"},
	"spec.apis[].objectSelector":                     {"objectSelector"},
	"spec.apis[].mutations.up[].path":                {"mutationsUp"},
	"spec.apis[].mutations.up[].expression":          {"mutationsUp"},
	"spec.apis[].mutations.up[].delete":              {"mutationsUp"},
	"spec.apis[].mutations.down[].path":              {"mutationsDown"},
	"spec.apis[].mutations.down[].expression":        {"mutationsDown"},
	"spec.apis[].mutations.down[].delete":            {"mutationsDown"},
	"spec.apis[].providerObjects=Ignore":             {"bind"},
	"spec.apis[].providerObjects=Import":             {"import"},
	"spec.conflictPolicy=Fail":                       {"bind"},
	"spec.conflictPolicy=Adopt":                      {"conflictAdopt"},
	"spec.deletionPolicy=Delete":                     {"deletionPolicy"},
	"spec.deletionPolicy=Orphan":                     {"deletionPolicy"},
	"spec.deletionPolicy=Foreground":                 {"deletionPolicy"},
	"spec.relatedResources[].group":                  {"relatedUpSelector", "relatedUpReference", "relatedDownSelector", "relatedDownReference"},
	"spec.relatedResources[].resource=secrets":       {"relatedUpSelector", "relatedUpReference", "relatedDownSelector", "relatedDownReference"},
	"spec.relatedResources[].resource=configmaps":    {"relatedUpSelector", "relatedUpReference", "relatedDownSelector", "relatedDownReference"},
	"spec.relatedResources[].direction=FromConsumer": {"relatedUpSelector", "relatedUpReference"},
	"spec.relatedResources[].direction=FromProvider": {"relatedDownSelector", "relatedDownReference"},
	"spec.relatedResources[].selector.labelSelector": {"relatedUpSelector", "relatedDownSelector"},
	"spec.relatedResources[].selector.names[]":       {"relatedUpSelector", "relatedDownSelector"},
	"spec.relatedResources[].reference.api":          {"relatedUpReference", "relatedDownReference"},
	"spec.relatedResources[].reference.fieldPath":    {"relatedUpReference", "relatedDownReference"},
	"spec.metadata.labels[]":                         {"metadata"},
	"spec.metadata.annotations[]":                    {"metadata"},
	"spec.namespaceSelector":                         {"namespaceSelector"},
	"spec.providerEvents=Forward":                    {"providerEvents"},
	"spec.providerEvents=Ignore":                     {"bind"},
	"spec.deletionProtection":                        {"deletionProtection"},
}

// objectAnnotations are the features users ask for on a consumer object,
// by annotation and value ("" for any value).
var objectAnnotations = map[string][]string{
	kbindv1alpha1.HandOverAnnotation + "=" + kbindv1alpha1.HandOverConsumer: {"adopt"},
	kbindv1alpha1.HandOverAnnotation + "=" + kbindv1alpha1.HandOverProvider: {"release"},
	kbindv1alpha1.DeletionPolicyAnnotation + "=":                            {"deletionPolicy"},
}

// actor is a hostile party, with exactly the rights the product hands it.
type actor struct{ id, name string }

var actors = []actor{
	{"tenant", "a provider-side tenant holding the kubeconfig `kubectl kbind grant` prints"},
	{"updater", "a consumer user with a Role in one namespace on the bound kinds, Secrets and ConfigMaps, without delete"},
	{"binder", "a consumer user who may create Bindings (and bound objects, Secrets, ConfigMaps) in one namespace"},
}

// verdict is what an entry found.
type verdict string

const (
	refused  verdict = "refused"
	harmless verdict = "harmless"
	// allowedDocumented is allowed, and said so by one of the allowances
	// below (as the provider table's).
	allowedDocumented verdict = "allowed"
	notApplicable     verdict = "n/a"
)

// entry is one cell or pair: a verdict, why, and — for a live one — what
// plays it: a row of this suite's tables ("consumer-attacks: <attempt>",
// "provider-attacks: <whose> <attempt>", "grant-attacks: <attempt>") or a
// test against real API servers ("test: TestName").
type entry struct {
	verdict verdict
	why     string
	live    []string
	// allowance names the documented allowance of an allowed entry.
	allowance string
}

var matrixAllowances = map[string]string{
	"relabel":          "A user who may update an object's labels or annotations decides which binding selects it and what happens to its copy when it leaves: taking it out of an `objectSelector` releases it like removing its API from the binding (its provider copy is deleted under the `Delete` policy, docs/shaping.md#filters), and with `core.kbind.io/deletion-policy: Delete` a move to another Connection deletes the old copy. A binding with `deletionProtection: true` keeps those copies instead (labelled `core.kbind.io/kept: DeletionProtection`, BIND-5, docs/bindings.md#bulk-paths-copies-kept-not-deleted); on an unprotected binding, bind what users must not destroy with `deletionPolicy: Orphan`, or give them no update on its objects.",
	"shared-namespace": "Under `Namespace` isolation every consumer namespace shares one provider namespace: a field kbind does not know (no reference entry declares it) names objects there unmapped, so a user of `team-x` can name `team-y`'s related copy and a provider controller may use it. Declare such fields as reference entries (kbind maps them, and no mutation may change them), or use `Prefixed` isolation (docs/isolation.md#related-secrets-and-configmaps).",
	"adopt-spec":       "An object adopted with `kubectl kbind adopt` is the consumer's from then on, spec included — a spec the provider wrote: a reference field in it that names a Secret of the namespace sends that Secret up at the next sync. Read the spec before adopting (docs/related.md#by-reference).",
	"import-mark":      "Without the konnector chart's imported-objects policy, a user who may update an object in a namespace a binding imports into can mark it `core.kbind.io/owner: provider` or ask for its release, and kbind deletes it later (docs/import.md); install the policy (`importedObjects.admissionPolicy: true`), which refuses both to users who may not delete the object.",
}

type cellKey struct{ feature, actor string }

// cells: every feature against every actor.
var cells = map[cellKey]entry{
	// A provider-side tenant.
	{"bind", "tenant"}: {refused, "another tenant's copies: refused by RBAC or the tenant's admission policy, in every mode", []string{
		"provider-attacks: a Namespace-isolated tenant's update an object", "provider-attacks: a Prefixed tenant's patch an object in its namespace"}, ""},
	{"routing", "tenant"}:           {notApplicable, "routes are chosen on the consumer, by its bindings and the labels of its objects and namespaces; nothing on the provider selects one", nil, ""},
	{"projection", "tenant"}:        {notApplicable, "the consumer API's names are the consumer ClusterBinding's; the grant reads CRDs, never writes them", nil, ""},
	{"objectSelector", "tenant"}:    {harmless, "an import's selector reads the labels of provider objects at this consumer's own place only: labels narrow what is imported there, never where", []string{"test: TestImportUnderNamespaceIsolation"}, ""},
	{"namespaceSelector", "tenant"}: {notApplicable, "it reads the consumer's namespaces' labels", nil, ""},
	{"mutationsUp", "tenant"}:       {notApplicable, "up rules and their input are the consumer's", nil, ""},
	{"mutationsDown", "tenant"}: {harmless, "down rules read provider objects the tenant may write (not their `/status`: RBAC), each object's rules bounded by the binding's cost budget and queued per namespace", []string{
		"provider-attacks: a Namespace-isolated tenant's write an object's status"}, ""},
	{"import", "tenant"}: {harmless, "what a tenant writes at its own place is imported for its own consumer only, and an imported object names nothing that goes up", []string{
		"consumer-attacks: a provider tenant creates an unmarked object the import brings into `team-y`"}, ""},
	{"adopt", "tenant"}:   {harmless, "adopting is a consumer user's request; from then on the consumer's spec wins and the tenant's edits are reverted", []string{"test: TestHandOverBothWays"}, ""},
	{"release", "tenant"}: {notApplicable, "a consumer user's request", nil, ""},
	{"relatedUpSelector", "tenant"}: {harmless, "the tenant reads what its own consumer sends to its place (that is the grant); another tenant's Secrets are refused; the Secrets it may write there are never service-account token Secrets (a credential that would outlive revoke)", []string{
		"provider-attacks: a Namespace-isolated tenant's read a Secret", "grant-attacks: a service-account token Secret for `default` in its own namespace"}, ""},
	{"relatedUpReference", "tenant"}: {refused, "an object the tenant plants is imported, and imported objects own no `FromConsumer` related objects", []string{
		"consumer-attacks: a provider tenant creates an unmarked object the import brings into `team-y`"}, ""},
	{"relatedDownSelector", "tenant"}: {harmless, "provider objects reach only the namespace whose binding selects them at its own place, never over an object kbind did not make (RelatedConflict)", []string{
		"consumer-attacks: a FromProvider entry naming another namespace's provider Secret", "test: TestForeignTargetsAndTokens"}, ""},
	{"relatedDownReference", "tenant"}: {harmless, "read next to the bound object that names it, at its namespace's place; never over an object kbind did not make", []string{"test: TestReferenceFromProviderFollowsItsOwner"}, ""},
	{"conflictAdopt", "tenant"}: {harmless, "Adopt takes only an unmarked object at this consumer's own place, which under Namespace and Prefixed isolation only this consumer's credential (and the provider's admin) may write; under None, shared namespaces are the provider table's [shares]", []string{
		"provider-attacks: a Namespace-isolated tenant's create an object in its namespace"}, ""},
	{"deletionPolicy", "tenant"}:     {notApplicable, "set on the consumer (the binding, the object's annotation)", nil, ""},
	{"metadata", "tenant"}:           {notApplicable, "labels and annotations go up only (an imported copy takes the selected labels from its own provider object)", nil, ""},
	{"deletionProtection", "tenant"}: {notApplicable, "set on the consumer's binding; the provider deletes no consumer binding", nil, ""},
	{"providerEvents", "tenant"}: {refused, "an Event reaches a consumer object only from its real copy at its place; forged markers are ignored", []string{
		"consumer-attacks: a provider tenant copies the victim's markers onto an object of its own"}, ""},

	// A consumer user with a Role in one namespace, without delete.
	{"bind", "updater"}:              {harmless, "its objects' copies go to its own namespace's provider place (the mapping is injective), nowhere else", []string{"test: TestNamespaceIsolation"}, ""},
	{"routing", "updater"}:           {allowedDocumented, "relabelling its object moves it between the routes the bindings offer; the old copy is kept unless the object's annotation says Delete", []string{"test: TestSeveralProviders"}, "relabel"},
	{"projection", "updater"}:        {notApplicable, "a ClusterBinding's (an admin's); objects of a projected API sync like any other", nil, ""},
	{"objectSelector", "updater"}:    {allowedDocumented, "removing the selected label releases the object", []string{"test: TestObjectSelector"}, "relabel"},
	{"namespaceSelector", "updater"}: {notApplicable, "namespaces' labels are the cluster admin's (the Role grants no namespace update)", nil, ""},
	{"mutationsUp", "updater"}:       {harmless, "the rules are the binding author's; the object's content drives their cost, bounded per object and queued per namespace", nil, ""},
	{"mutationsDown", "updater"}:     {harmless, "as up: the rules are the binding author's, their cost bounded per object", nil, ""},
	{"import", "updater"}: {refused, "marking its object `core.kbind.io/owner: provider` (which kbind would delete later) is refused by the imported-objects policy", []string{
		"test: TestImportedObjectsPolicyOnARealAPIServer"}, "import-mark"},
	{"adopt", "updater"}: {refused, "an adoption the objectSelector would release at once (deleting the provider's object) is refused by the konnector; otherwise the object becomes the consumer's, which the user still may not delete", []string{
		"consumer-attacks: a user who may update but not delete objects adopts", "test: TestAdoptRefusedWhenTheSelectorWouldReleaseIt"}, ""},
	{"release", "updater"}: {refused, "a release makes the object one kbind deletes later: refused to a user who may not delete it", []string{
		"consumer-attacks: a user who may update but not delete objects asks for the release"}, "import-mark"},
	{"relatedUpSelector", "updater"}:  {harmless, "a Secret it makes that an entry selects goes to its own namespace's provider place, as the binding author asked", nil, ""},
	{"relatedUpReference", "updater"}: {allowedDocumented, "its object names a Secret of its own namespace only (mapped to that namespace's place); a field no entry declares is sent unmapped", nil, "shared-namespace"},
	{"relatedDownSelector", "updater"}: {harmless, "copies come only into namespaces whose binding selects them, never over an object kbind did not make; an edit of a copy is reverted", []string{
		"test: TestForeignTargetsAndTokens"}, ""},
	{"relatedDownReference", "updater"}: {harmless, "naming another name brings the provider's object of that name at its own namespace's place, never over an object kbind did not make", []string{"test: TestReferenceFromProviderFollowsItsOwner"}, ""},
	{"conflictAdopt", "updater"}:        {harmless, "Adopt acts on the provider's unmarked objects at its own namespace's place, which the Connection's credential may write anyway", nil, ""},
	{"deletionPolicy", "updater"}:       {allowedDocumented, "`Delete` on its object makes a move delete the old copy; `Orphan` keeps copies", nil, "relabel"},
	{"metadata", "updater"}:             {harmless, "its labels and annotations go up under the keys the binding selects, never kbind's", nil, ""},
	{"providerEvents", "updater"}:       {notApplicable, "the provider's Events, which the konnector writes", nil, ""},
	{"deletionProtection", "updater"}:   {notApplicable, "its Role grants nothing on bindings, and the kubeconfig Secrets are in the konnector's namespace", nil, ""},

	// A consumer user who may create Bindings in one namespace.
	{"bind", "binder"}: {refused, "only through a Connection that admits its namespace, never an API a ClusterBinding serves", []string{
		"consumer-attacks: a Binding naming a Connection that does not admit its namespace", "consumer-attacks: a Binding binds an API before an admin's ClusterBinding of it"}, ""},
	{"routing", "binder"}: {harmless, "an admin's ClusterBinding takes precedence over its Binding", []string{
		"consumer-attacks: a Binding binds an API before an admin's ClusterBinding of it"}, ""},
	{"projection", "binder"}: {refused, "a Binding cannot project (the API server refuses it); the names it installs never collide with the cluster's CRDs, and never block an admin's later projection onto them for good", []string{
		"consumer-attacks: a Binding of an API whose names collide", "consumer-attacks: a Binding binds an unprojected API at the name an admin's ClusterBinding later projects onto"}, ""},
	{"objectSelector", "binder"}:    {harmless, "it selects among its own namespace's objects only", nil, ""},
	{"namespaceSelector", "binder"}: {refused, "a Binding has none (the API server refuses it)", []string{"test: TestValidationRejects"}, ""},
	{"mutationsUp", "binder"}: {refused, "a namespaced Binding's rules run under a per-object budget far below a ClusterBinding's, on a queue fair to every namespace; no rule may rewrite a reference field", []string{
		"consumer-attacks: a Binding whose mutations", "consumer-attacks: a Binding whose `up` mutation rewrites the field a reference entry maps"}, ""},
	{"mutationsDown", "binder"}: {refused, "the same per-object budget", []string{"consumer-attacks: a Binding whose mutations"}, ""},
	{"import", "binder"}:        {harmless, "a Binding imports into its own namespace only, objects at its own place only; None isolation is refused (ImportRefused)", []string{"test: TestImportUnderNamespaceIsolation"}, ""},
	{"adopt", "binder"}: {refused, "it adopts objects of its own namespace only, and never one the objectSelector would release at once", []string{
		"test: TestAdoptRefusedWhenTheSelectorWouldReleaseIt"}, ""},
	{"release", "binder"}: {refused, "a release the import would undo is refused by the konnector", []string{
		"consumer-attacks: a release of an object the entry's `objectSelector` would not import back"}, ""},
	{"relatedUpSelector", "binder"}: {refused, "a Binding reads its own namespace only: the kubeconfig Secrets are out of reach; the namespace's watch budget holds", []string{
		"consumer-attacks: a FromConsumer entry naming the Connections' kubeconfig Secrets", "consumer-attacks: a Binding watching more related objects than its namespace's budget"}, ""},
	{"relatedUpReference", "binder"}: {harmless, "its own namespace's Secrets, sent to its own place", []string{"test: TestReferenceFromConsumerUnderNamespaceIsolation"}, ""},
	{"relatedDownSelector", "binder"}: {refused, "another namespace's provider Secrets are never copied into its namespace", []string{
		"consumer-attacks: a FromProvider entry naming another namespace's provider Secret"}, ""},
	{"relatedDownReference", "binder"}: {harmless, "read at its own namespace's place", []string{"test: TestReferenceFromProviderFollowsItsOwner"}, ""},
	{"conflictAdopt", "binder"}:        {harmless, "Adopt takes unmarked objects at its own namespace's place only, never another consumer's (OwnedByAnother)", nil, ""},
	{"deletionPolicy", "binder"}:       {harmless, "its Binding's objects are its namespace's; deleting it releases only what no other binding covers", nil, ""},
	{"metadata", "binder"}:             {harmless, "its namespace's objects, never kbind's keys", nil, ""},
	{"providerEvents", "binder"}:       {harmless, "the Events of its namespace's copies, read at its place", nil, ""},
	{"deletionProtection", "binder"}: {refused, "deleting a protected binding, Connection or labelled kubeconfig Secret is refused by the chart's policy, whatever the propagation policy, dry-run or DeleteCollection; turning protection off is an ordinary, audited update of what it may update", []string{
		"deletion-protection-attacks: `kubectl delete` of a protected", "deletion-protection-attacks: the same with another propagation policy", "deletion-protection-attacks: a DeleteCollection",
		"bulk-deletion-protection-attacks: remove an API from the protected", "bulk-deletion-protection-attacks: the same removal in the edit",
		"bulk-deletion-protection-attacks: remove the label by which", "bulk-deletion-protection-attacks: narrow an API's `objectSelector`"}, ""},
}

// pairEntry is a pair of features, or a feature with every other ("*",
// when one line says why it combines with anything).
type pairEntry struct {
	a, b string
	entry
}

var pairs = []pairEntry{
	// Orthogonal by construction.
	{"deletionProtection", "*", entry{harmless, "it refuses a DELETE of the binding and an edit removing an API from it, and where a feature would delete provider copies in bulk (a deselection, an API removed) it keeps them with kbind's markers, labelled kept (BIND-5); an object deleted itself is handled by each feature as before", []string{"test: TestProtectedNamespaceRelabelKeepsCopies", "test: TestProtectedObjectSelectorEditKeepsCopies"}, ""}},
	{"providerEvents", "*", entry{harmless, "it writes only Events about a consumer object and reads only the Events of its real copy; it changes no object", nil, ""}},
	{"mutationsDown", "*", entry{harmless, "down rules write only `.status` of what goes to the consumer object, never its metadata, owner, finalizer or spec", nil, ""}},
	{"projection", "bind", entry{refused, "a projection never installs names another CRD of the group holds, and takes a name a Binding's empty CRD held once no Binding lists it", []string{
		"consumer-attacks: a Binding binds an unprojected API at the name an admin's ClusterBinding later projects onto", "test: TestProjectionOntoAKindTheGroupHas"}, ""}},
	{"projection", "*", entry{harmless, "it renames the consumer API; every other feature acts on the objects through the same mapping (a ClusterBinding's only)", []string{"test: TestProjection"}, ""}},

	// Pairs that act on the same object, attacked together.
	{"import", "relatedUpReference", entry{refused, "imported objects own no `FromConsumer` related objects", []string{
		"consumer-attacks: a provider tenant creates an unmarked object the import brings into `team-y`"}, ""}},
	{"import", "release", entry{refused, "a release the import would not take back is refused; one by a user who may not delete is refused by the policy", []string{
		"consumer-attacks: a release of an object the entry's `objectSelector` would not import back", "consumer-attacks: a user who may update but not delete objects asks for the release"}, ""}},
	{"objectSelector", "release", entry{refused, "the release is checked against the selector, as the import will read the copy's labels", []string{
		"consumer-attacks: a release of an object the entry's `objectSelector` would not import back"}, ""}},
	{"metadata", "release", entry{harmless, "the labels copied up are what a released object is imported back by: the release is checked against them", []string{"test: TestReleaseRefusedWhenImportWouldNotTakeItBack"}, ""}},
	{"import", "objectSelector", entry{harmless, "the selector reads the provider object's labels; an object it stops selecting loses its imported copy (the provider's object stays)", []string{"test: TestImportUnderNamespaceIsolation"}, ""}},
	{"import", "namespaceSelector", entry{harmless, "imports into selected namespaces only; deselecting removes imported copies, never a user's object", []string{"test: TestImportUnderNamespaceIsolation"}, ""}},
	{"import", "adopt", entry{harmless, "one owner at every moment; both objects keep their UIDs", []string{"test: TestHandOverBothWays"}, ""}},
	{"objectSelector", "adopt", entry{refused, "an adoption is checked against the selector as the ordinary sync will read the adopted object's labels (imported copies carry only the labels `metadata` selects)", []string{
		"consumer-attacks: a user who may update but not delete objects adopts", "test: TestAdoptRefusedWhenTheSelectorWouldReleaseIt"}, ""}},
	{"adopt", "release", entry{harmless, "one owner at every moment, switched in one write each way", []string{"test: TestHandOverBothWays"}, ""}},
	{"import", "conflictAdopt", entry{harmless, "a user's object at an imported name is ConsumerObjectExists: neither side is touched, Adopt or not", []string{"test: TestImportUnderNamespaceIsolation"}, ""}},
	{"import", "deletionPolicy", entry{harmless, "an imported copy has no finalizer and no provider copy of its own: its deletion is undone, the policy does not apply", nil, ""}},
	{"import", "bind", entry{harmless, "imported and consumer-made objects are told apart by the owner annotation and the finalizer, never both", []string{"test: TestImportUnderNamespaceIsolation"}, ""}},
	{"import", "routing", entry{harmless, "a namespace is filled only by the Connection its objects route to", nil, ""}},
	{"import", "mutationsUp", entry{harmless, "nothing of an imported object goes up", nil, ""}},
	{"import", "metadata", entry{harmless, "an imported copy takes the selected labels from its provider object; nothing goes up", nil, ""}},
	{"import", "relatedDownReference", entry{harmless, "a provider Secret an imported object names comes down next to it, never over an object kbind did not make", nil, ""}},
	{"adopt", "relatedUpReference", entry{allowedDocumented, "an adopted object is the consumer's: what it names goes up from then on", []string{"test: TestReferenceFromConsumerNeverForImported"}, "adopt-spec"}},
	{"mutationsUp", "relatedUpReference", entry{refused, "no up rule may rewrite a reference field; the field is mapped after the rules", []string{
		"consumer-attacks: a Binding whose `up` mutation rewrites the field a reference entry maps", "test: TestWritesReference"}, ""}},
	{"mutationsUp", "relatedDownReference", entry{refused, "no up rule may rewrite a reference field", []string{"test: TestWritesReference"}, ""}},
	{"mutationsUp", "*", entry{harmless, "up rules write only `.spec` of the outgoing copy (never metadata, markers, names), and never a reference field", nil, ""}},
	{"relatedUpReference", "relatedDownReference", entry{harmless, "copies are owned per (binding, entry): two entries never delete each other's", []string{"test: TestReferenceFromProviderFollowsItsOwner"}, ""}},
	{"relatedUpSelector", "relatedUpReference", entry{harmless, "copies are owned per (binding, entry); the first entry that selects a source copies it", nil, ""}},
	{"relatedDownSelector", "relatedDownReference", entry{harmless, "copies are owned per (binding, entry)", nil, ""}},
	{"relatedUpSelector", "relatedDownSelector", entry{harmless, "each direction writes the other side only; a copy kbind made is never a source", nil, ""}},
	{"relatedUpSelector", "relatedDownReference", entry{harmless, "each direction writes the other side only; a copy kbind made is never a source", nil, ""}},
	{"relatedUpReference", "relatedDownSelector", entry{harmless, "each direction writes the other side only; a copy kbind made is never a source", nil, ""}},
	{"relatedUpReference", "deletionPolicy", entry{harmless, "under Orphan the related copies are released (kept, unmarked) before the finalizer goes", []string{"test: TestReferenceFromProviderFollowsItsOwner"}, ""}},
	{"relatedDownReference", "deletionPolicy", entry{harmless, "under Orphan the related copies are released before the finalizer goes", []string{"test: TestReferenceFromProviderFollowsItsOwner"}, ""}},
	{"relatedUpReference", "*", entry{harmless, "it reads a field of the bound object and writes only related copies (and the mapped field of the provider copy)", nil, ""}},
	{"relatedDownReference", "*", entry{harmless, "it reads a field of the bound object and writes only related copies (and the mapped field of the provider copy)", nil, ""}},
	{"objectSelector", "routing", entry{allowedDocumented, "a relabel moves an object between routes; the old copy is kept unless the object says Delete", []string{"test: TestSeveralProviders"}, "relabel"}},
	{"namespaceSelector", "routing", entry{allowedDocumented, "a namespace relabel moves its objects between routes; the old copies are kept unless an object says Delete", []string{"test: TestSeveralProviders"}, "relabel"}},
	{"objectSelector", "deletionPolicy", entry{allowedDocumented, "a deselected object is released under its deletion policy (Orphan keeps the copy)", []string{"test: TestObjectSelector"}, "relabel"}},
	{"namespaceSelector", "deletionPolicy", entry{allowedDocumented, "a deselected namespace's objects are released under their deletion policy", []string{"test: TestObjectSelector"}, "relabel"}},
	{"routing", "deletionPolicy", entry{allowedDocumented, "a moved object's old copy is deleted only when its annotation says Delete or it is itself being deleted", []string{"test: TestSeveralProviders"}, "relabel"}},
	{"objectSelector", "namespaceSelector", entry{harmless, "both must select; a failed or unparsable read releases nothing", []string{"test: TestObjectSelector"}, ""}},
	{"objectSelector", "*", entry{harmless, "it decides only whether the object syncs through this binding; what leaving does is the deletion policy's (above)", nil, ""}},
	{"namespaceSelector", "*", entry{harmless, "it decides only whether a namespace's objects sync through this binding", nil, ""}},
	{"conflictAdopt", "*", entry{harmless, "it stamps this consumer's markers only on an unmarked object at the object's own place; another consumer's is OwnedByAnother whatever the policy", []string{"test: TestConflicts"}, ""}},
	{"release", "*", entry{harmless, "a release is checked against the import (the selectors, the provider copy's labels) and done in one write; nothing is deleted by it", nil, ""}},
	{"adopt", "*", entry{harmless, "an adoption stamps this object's markers on the provider object conditionally, then switches the owner in one write; nothing is deleted", nil, ""}},
	{"import", "*", entry{harmless, "it writes only consumer objects it imported (owner annotation) and deletes them only on the provider's own answer or a deliberate scope change", nil, ""}},
	{"deletionPolicy", "*", entry{harmless, "it applies only when the object is deleted, deselected or drained, always to the copy its markers say is its", nil, ""}},
	{"metadata", "*", entry{harmless, "it writes only the selected label and annotation keys of the provider copy, never kbind's", nil, ""}},
	{"routing", "*", entry{harmless, "one route holds an object's finalizer at a time; claims come from the bindings, never from a Connection's health", nil, ""}},
	{"bind", "*", entry{harmless, "the base sync: every feature above acts through it", nil, ""}},
}

// TestFeatureMatrix holds the matrix complete and true: every field of
// the binding API classified, every feature against every actor, every
// pair of features that act on the same object or Secret; every live
// entry names a row of this suite's tables or a test against real API
// servers that exists; docs/isolation.md shows it.
func TestFeatureMatrix(t *testing.T) {
	t.Parallel() // pure: reads the API types, the tests' sources and docs/isolation.md
	byID := map[string]feature{}
	for _, f := range features {
		byID[f.id] = f
	}
	// Every field classified, every classification a field.
	fields := bindingFields(t)
	for _, f := range fields {
		ids, ok := fieldFeatures[f]
		if !ok {
			t.Errorf("field %s of the binding API is not classified: say in e2e/attack/matrix_test.go which features it is (fieldFeatures), and attack it with every actor and with the features it meets", f)
		}
		for _, id := range ids {
			if _, ok := byID[id]; !ok {
				t.Errorf("field %s is classified as unknown feature %q", f, id)
			}
		}
	}
	for f := range fieldFeatures {
		if !slices.Contains(fields, f) {
			t.Errorf("fieldFeatures classifies %s, which the binding API no longer has", f)
		}
	}
	for ann, ids := range objectAnnotations {
		for _, id := range ids {
			if _, ok := byID[id]; !ok {
				t.Errorf("annotation %s is classified as unknown feature %q", ann, id)
			}
		}
	}
	for _, f := range features {
		if !classified(f.id) {
			t.Errorf("feature %s comes from no field or annotation", f.id)
		}
	}

	tables := attackTables(t)
	check := func(what string, e entry) {
		switch e.verdict {
		case refused, harmless, allowedDocumented, notApplicable:
		default:
			t.Errorf("%s: verdict %q", what, e.verdict)
		}
		if strings.TrimSpace(e.why) == "" {
			t.Errorf("%s: no reason given", what)
		}
		if e.verdict == allowedDocumented {
			if _, ok := matrixAllowances[e.allowance]; !ok {
				t.Errorf("%s: allowed without a documented allowance", what)
			}
		}
		if e.verdict == refused && len(e.live) == 0 {
			t.Errorf("%s: refused, but no live attack plays it", what)
		}
		for _, l := range e.live {
			if err := livePlayed(tables, l); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
	}
	for _, f := range features {
		for _, a := range actors {
			e, ok := cells[cellKey{f.id, a.id}]
			if !ok {
				t.Errorf("no entry for feature %s against actor %s: attack it, or say in one line why it cannot apply", f.id, a.id)
				continue
			}
			check(f.id+" × "+a.id, e)
		}
	}
	for k := range cells {
		if _, ok := byID[k.feature]; !ok {
			t.Errorf("a cell names unknown feature %s", k.feature)
		}
	}
	met := meetingPairs()
	for _, p := range pairs {
		if _, ok := byID[p.a]; !ok {
			t.Errorf("a pair names unknown feature %s", p.a)
		}
		if _, ok := byID[p.b]; !ok && p.b != "*" {
			t.Errorf("a pair names unknown feature %s", p.b)
		}
		check(p.a+" + "+p.b, p.entry)
	}
	for _, m := range met {
		if _, ok := pairFor(m[0], m[1]); !ok {
			t.Errorf("features %s and %s act on the same object and no pair entry says what happens when they meet", m[0], m[1])
		}
	}
	doc := renderMatrix(fields, met)
	t.Logf("feature matrix: %d fields, %d features × %d actors, %d pairs that meet", len(fields), len(features), len(actors), len(met))
	checkDocs(t, "feature-matrix", doc)
}

func classified(id string) bool {
	for _, ids := range fieldFeatures {
		if slices.Contains(ids, id) {
			return true
		}
	}
	for _, ids := range objectAnnotations {
		if slices.Contains(ids, id) {
			return true
		}
	}
	return false
}

// meetingPairs are the pairs of features that act on a same target.
func meetingPairs() [][2]string {
	var out [][2]string
	for i := range features {
		for j := i + 1; j < len(features); j++ {
			if shareTarget(features[i], features[j]) {
				out = append(out, [2]string{features[i].id, features[j].id})
			}
		}
	}
	return out
}

func shareTarget(a, b feature) bool {
	for _, x := range a.acts {
		for _, y := range b.acts {
			if x == y {
				return true
			}
		}
	}
	return false
}

// pairFor is the entry for features a and b: the exact pair first (either
// order), else the first wildcard of either, in the order listed.
func pairFor(a, b string) (pairEntry, bool) {
	for _, p := range pairs {
		if (p.a == a && p.b == b) || (p.a == b && p.b == a) {
			return p, true
		}
	}
	for _, p := range pairs {
		if p.b == "*" && (p.a == a || p.a == b) {
			return p, true
		}
	}
	return pairEntry{}, false
}

// bindingFields enumerates the leaf fields of BindingSpec by reflection
// ("spec.apis[].name"); a field of an enum type comes once per value of
// its enum in the generated CRD schema ("spec.conflictPolicy=Adopt").
func bindingFields(t *testing.T) []string {
	t.Helper()
	all, err := kbindcrds.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	var spec *apiextensionsv1.JSONSchemaProps
	for _, c := range all {
		if c.Spec.Names.Kind == "ClusterBinding" {
			s := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			spec = &s
		}
	}
	if spec == nil {
		t.Fatal("no ClusterBinding CRD among the embedded CRDs")
	}
	var out []string
	walkFields(reflect.TypeOf(kbindv1alpha1.BindingSpec{}), "spec", spec, &out)
	sort.Strings(out)
	return out
}

var labelSelectorType = reflect.TypeOf(metav1.LabelSelector{})

func walkFields(typ reflect.Type, path string, schema *apiextensionsv1.JSONSchemaProps, out *[]string) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ == labelSelectorType:
		*out = append(*out, path)
	case typ.Kind() == reflect.Slice:
		var items *apiextensionsv1.JSONSchemaProps
		if schema != nil && schema.Items != nil {
			items = schema.Items.Schema
		}
		walkFields(typ.Elem(), path+"[]", items, out)
	case typ.Kind() == reflect.Struct:
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			var sub *apiextensionsv1.JSONSchemaProps
			if schema != nil {
				if s, ok := schema.Properties[name]; ok {
					sub = &s
				}
			}
			walkFields(f.Type, path+"."+name, sub, out)
		}
	default:
		if schema != nil && len(schema.Enum) > 0 {
			for _, v := range schema.Enum {
				*out = append(*out, path+"="+strings.Trim(string(v.Raw), `"`))
			}
			return
		}
		*out = append(*out, path)
	}
}

// attackTables reads the attempts of this suite's tables in
// docs/isolation.md (which the tests hold equal to what they measured),
// by table.
func attackTables(t *testing.T) map[string][]string {
	t.Helper()
	docsMu.Lock()
	defer docsMu.Unlock()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "isolation.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	block := regexp.MustCompile(`(?s)<!-- BEGIN ([a-z-]+) \(generated by e2e/attack\) -->\n(.*?)<!-- END `)
	for _, m := range block.FindAllStringSubmatch(string(data), -1) {
		for _, line := range strings.Split(m[2], "\n") {
			cols := strings.Split(line, " | ")
			if !strings.HasPrefix(line, "| ") || len(cols) < 2 || strings.HasPrefix(line, "|---") {
				continue
			}
			attempt := strings.TrimPrefix(cols[0], "| ")
			if m[1] == "provider-attacks" {
				attempt += " " + cols[1]
			}
			out[m[1]] = append(out[m[1]], attempt)
		}
	}
	return out
}

// testFuncs are the names of the test functions of the repository.
var testFuncs = func() map[string]bool {
	out := map[string]bool{}
	re := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	root := filepath.Join("..", "..")
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && path != root && strings.HasPrefix(d.Name(), "."):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, "_test.go"):
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			out[m[1]] = true
		}
		return nil
	})
	return out
}()

// livePlayed checks that what a live entry names is played: a row of one
// of the tables (by the start of its attempt), or a test that exists.
func livePlayed(tables map[string][]string, live string) error {
	kind, what, _ := strings.Cut(live, ": ")
	if kind == "test" {
		if !testFuncs[what] {
			return fmt.Errorf("names test %s, which does not exist", what)
		}
		return nil
	}
	rows, ok := tables[kind]
	if !ok {
		return fmt.Errorf("names table %s, which docs/isolation.md does not have", kind)
	}
	for _, r := range rows {
		if strings.HasPrefix(r, what) {
			return nil
		}
	}
	return fmt.Errorf("names %q, which is no row of the %s table", what, kind)
}

// renderMatrix is docs/isolation.md's feature-matrix block: the fields
// and their features, every feature against every actor, and every pair
// that meets.
func renderMatrix(fields []string, met [][2]string) string {
	var b strings.Builder
	used := map[string]bool{}
	b.WriteString("Features (from the `BindingSpec` fields, by reflection, and the annotations users set on objects):\n\n| feature | fields | acts on |\n|---|---|---|\n")
	for _, f := range features {
		var from []string
		for _, field := range fields {
			if slices.Contains(fieldFeatures[field], f.id) {
				from = append(from, "`"+strings.TrimPrefix(field, "spec.")+"`")
			}
		}
		var anns []string
		for ann, ids := range objectAnnotations {
			if slices.Contains(ids, f.id) {
				anns = append(anns, "`"+ann+"`")
			}
		}
		sort.Strings(anns)
		from = append(from, anns...)
		acts := make([]string, 0, len(f.acts))
		for _, a := range f.acts {
			acts = append(acts, string(a))
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", f.name, strings.Join(from, ", "), strings.Join(acts, ", "))
	}
	b.WriteString("\nActors:\n\n")
	for _, a := range actors {
		fmt.Fprintf(&b, "- **%s**: %s\n", a.id, a.name)
	}
	b.WriteString("\nEvery feature against every actor:\n\n| feature | actor | verdict | why | played by |\n|---|---|---|---|---|\n")
	for _, f := range features {
		for _, a := range actors {
			e := cells[cellKey{f.id, a.id}]
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", f.id, a.id, verdictText(e, used), e.why, playedBy(e))
		}
	}
	b.WriteString("\nEvery pair of features that act on the same object or Secret:\n\n| features | verdict | why | played by |\n|---|---|---|---|\n")
	for _, m := range met {
		p, _ := pairFor(m[0], m[1])
		fmt.Fprintf(&b, "| %s + %s | %s | %s | %s |\n", m[0], m[1], verdictText(p.entry, used), p.why, playedBy(p.entry))
	}
	texts := map[string]string{}
	for id := range used {
		texts[id] = matrixAllowances[id]
	}
	b.WriteString(footnotes(texts))
	return b.String()
}

func verdictText(e entry, used map[string]bool) string {
	if e.allowance == "" {
		return string(e.verdict)
	}
	used[e.allowance] = true
	return string(e.verdict) + " [" + e.allowance + "]"
}

func playedBy(e entry) string {
	if len(e.live) == 0 {
		return "—"
	}
	out := make([]string, 0, len(e.live))
	for _, l := range e.live {
		kind, what, _ := strings.Cut(l, ": ")
		if kind == "test" {
			out = append(out, "`"+what+"`")
			continue
		}
		out = append(out, kind+" table: "+what)
	}
	return strings.Join(out, "; ")
}
