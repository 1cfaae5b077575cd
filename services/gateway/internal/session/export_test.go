package session

import "time"

// SetClock replaces time.Now (tests).
func (s *Store) SetClock(now func() time.Time) { s.now = now }

// WithMaxBytes is cfg with a bucket of n bytes instead of 64 MiB (tests).
func WithMaxBytes(cfg Config, n int64) Config {
	cfg.maxBytes = n
	return cfg
}
