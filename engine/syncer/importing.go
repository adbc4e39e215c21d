// Import (#36, work in progress, not wired): provider objects of an API
// that kbind did not create from this consumer appear on the consumer,
// owned by the provider (core.kbind.io/owner: provider). This file holds
// the decision; the sync path does not call it yet.

package syncer

// ImportAction is what the sync of an imported API does for one consumer
// key.
type ImportAction string

const (
	// ImportNothing: nothing to import at this key, or the copy follows
	// the provider object already.
	ImportNothing ImportAction = "Nothing"
	// ImportCreate creates the consumer copy of the provider object
	// (again, with a new UID, after a consumer delete).
	ImportCreate ImportAction = "Create"
	// ImportUpdate writes the provider object's spec, selected labels and
	// status over the consumer copy: a consumer edit is reverted.
	ImportUpdate ImportAction = "Update"
	// ImportDelete deletes the consumer copy: the provider object is gone
	// or going.
	ImportDelete ImportAction = "Delete"
	// ImportConflict: a consumer object that is not an imported copy holds
	// the name; it is never overwritten.
	ImportConflict ImportAction = "Conflict"
)

// ImportState is what one key's sync knows of both sides.
type ImportState struct {
	// ProviderExists: a provider object at the key's provider place;
	// ProviderMarked: it carries kbind's markers (a copy of a consumer
	// object, never imported); ProviderDeleting: it is being deleted.
	ProviderExists, ProviderMarked, ProviderDeleting bool
	// ConsumerExists: a consumer object at the key; ConsumerImported: it
	// is an imported copy (core.kbind.io/owner: provider);
	// ConsumerDeleting: it is being deleted.
	ConsumerExists, ConsumerImported, ConsumerDeleting bool
	// InSync: the consumer copy's spec, selected labels and status equal
	// the provider object's.
	InSync bool
}

// DecideImport decides what the sync does for one key of an imported API.
// Only a consumer object that is an imported copy is ever written or
// deleted; a provider object with kbind's markers is the ordinary
// consumer-to-provider flow's.
func DecideImport(s ImportState) ImportAction {
	switch {
	case !s.ProviderExists || s.ProviderDeleting:
		if s.ConsumerImported && !s.ConsumerDeleting {
			return ImportDelete
		}
		return ImportNothing
	case s.ProviderMarked:
		return ImportNothing
	case !s.ConsumerExists:
		return ImportCreate
	case !s.ConsumerImported:
		return ImportConflict
	case s.ConsumerDeleting:
		// Deleted on the consumer: created again once it is gone.
		return ImportNothing
	case !s.InSync:
		return ImportUpdate
	default:
		return ImportNothing
	}
}
