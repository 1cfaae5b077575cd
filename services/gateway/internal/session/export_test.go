package session

import "time"

// SetClock replaces time.Now (tests).
func (s *Store) SetClock(now func() time.Time) { s.now = now }
