package auth

// KeyRef names a configured API key without its secret: its user and its
// Fingerprint.
type KeyRef struct {
	User        string
	Fingerprint string
}

// Replace makes keys and admins the configuration from now on: the next
// request is judged by them, so a key added works at once and a removed
// one is a 401. It returns the keys that no longer act for their user —
// removed, or given to another user — for the caller to end what they
// opened (connections, sessions).
func (k *Keys) Replace(keys []Key, admins map[string]bool) (removed []KeyRef) {
	next := newKeySet(keys, admins)
	prev := k.set.Swap(next)
	for fp, user := range prev.byFingerprint {
		if u, ok := next.byFingerprint[fp]; !ok || u != user {
			removed = append(removed, KeyRef{User: user, Fingerprint: fp})
		}
	}
	return removed
}
