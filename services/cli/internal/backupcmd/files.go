package backupcmd

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
)

// FileSum names a file of a backup (relative to its directory) with its
// size and SHA-256, checked before a restore touches anything.
type FileSum struct {
	File   string `json:"file"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// sumWriter counts and hashes what goes through it to w.
type sumWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (s *sumWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.h.Write(p[:n])
	s.n += int64(n)
	return n, err
}

// writeFile creates dir/rel (mode 0600, never over an existing file), lets
// fill write it, syncs it to disk and returns its sum.
func writeFile(dir, rel string, fill func(io.Writer) error) (FileSum, error) {
	path := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return FileSum{}, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return FileSum{}, err
	}
	sw := &sumWriter{w: f, h: sha256.New()}
	err = fill(sw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return FileSum{}, fmt.Errorf("%s: %w", rel, err)
	}
	return FileSum{File: rel, Bytes: sw.n, SHA256: hex.EncodeToString(sw.h.Sum(nil))}, nil
}

// verify reads the file s names in dir and checks its size and SHA-256.
func (s FileSum) verify(dir string) error {
	if s.File == "" || !filepath.IsLocal(filepath.FromSlash(s.File)) {
		return fmt.Errorf("file %q is not a path inside the backup", s.File)
	}
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(s.File)))
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // only read
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("%s: %w", s.File, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != s.Bytes || got != s.SHA256 {
		return fmt.Errorf("%s: %d bytes with SHA-256 %s, the manifest says %d bytes with %s: the backup is damaged", s.File, n, got, s.Bytes, s.SHA256)
	}
	return nil
}

// open opens the file s names in dir.
func (s FileSum) open(dir string) (*os.File, error) {
	return os.Open(filepath.Join(dir, filepath.FromSlash(s.File)))
}

// syncDir makes a directory's entries (created files, a rename) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
