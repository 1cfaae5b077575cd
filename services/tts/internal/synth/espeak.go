package synth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Espeak synthesises with a local espeak-ng: fast, offline, no GPU, and
// robotic. The text goes to the process on stdin (never through a shell or
// as an argument, where a leading "-" would be read as an option); its WAV
// (22050 Hz) is resampled to 24 kHz as it streams out.
type Espeak struct {
	path  string
	voice string
}

// NewEspeak finds the espeak-ng binary (a name is looked up in PATH) and
// checks that it speaks with voice, so a missing binary or voice fails at
// start rather than at the first sentence.
func NewEspeak(ctx context.Context, path, voice string) (*Espeak, error) {
	bin, err := exec.LookPath(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %q (install espeak-ng, or set ALICIA_ESPEAK_PATH): %w", ErrNoEspeak, path, err)
	}
	e := &Espeak{path: bin, voice: voice}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.Synthesize(ctx, "ready", func([]byte) error { return nil }); err != nil {
		return nil, fmt.Errorf("synth: espeak-ng %s with voice %q: %w", bin, voice, err)
	}
	return e, nil
}

// Engine names the backend and voice for SentenceAudio.engine.
func (e *Espeak) Engine() string { return "espeak:" + e.voice }

// Synthesize speaks text and emits 24 kHz PCM while espeak-ng produces it.
// Cancelling ctx kills the process.
func (e *Espeak) Synthesize(ctx context.Context, text string, emit Emit) error {
	cmd := exec.CommandContext(ctx, e.path, "--stdout", "-v", e.voice, "-b", "1", "--stdin")
	cmd.Stdin = strings.NewReader(text)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("synth: espeak-ng: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: espeak-ng: %w", ErrUnavailable, err)
	}
	_, rerr := readWAV(out, emit)
	if rerr != nil {
		// Stop a process whose output we no longer read, then reap it.
		_ = cmd.Process.Kill()
	}
	werr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(rerr, ErrNoAudio) && stderr.String() != "":
		return fmt.Errorf("%w: espeak-ng: %s", ErrRejected, stderr.String())
	case rerr != nil:
		return rerr
	case werr != nil:
		return fmt.Errorf("%w: espeak-ng: %w: %s", ErrUnavailable, werr, stderr.String())
	}
	return nil
}

// limitedBuffer keeps the first 1 KiB written to it (espeak-ng's stderr).
type limitedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := 1024 - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}
