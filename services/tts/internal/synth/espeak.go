package synth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pkg/engines"
)

// Espeak synthesises with a local espeak-ng: fast, offline, no GPU, and
// robotic. The text goes to the process on stdin (never through a shell or
// as an argument, where a leading "-" would be read as an option); its WAV
// (22050 Hz) is resampled to 24 kHz as it streams out.
type Espeak struct {
	path  string
	voice string
	// known are the voices espeak-ng has (-v silently falls back to its
	// default for another name), read at start.
	known map[string]bool
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
	voices, err := engines.EspeakVoices(ctx, bin)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	e.known = make(map[string]bool, len(voices))
	for _, v := range voices {
		e.known[v.ID] = true
	}
	if err := e.Synthesize(ctx, "ready", Voice{}, func([]byte) error { return nil }); err != nil {
		return nil, fmt.Errorf("synth: espeak-ng %s with voice %q: %w", bin, voice, err)
	}
	return e, nil
}

// Engine names the backend and voice for SentenceAudio.engine.
func (e *Espeak) Engine() string { return "espeak:" + e.voice }

// espeakWPM is espeak-ng's own speaking rate (-s), words per minute: speed 1.
const espeakWPM = 175

// Synthesize speaks text in voice v (espeak-ng's voices are languages:
// v.Name, else v.Language, else the configured voice; v.Speed scales the
// words per minute) and emits 24 kHz PCM while espeak-ng produces it.
// Cancelling ctx kills the process.
func (e *Espeak) Synthesize(ctx context.Context, text string, v Voice, emit Emit) error {
	voice, err := e.voiceFor(v)
	if err != nil {
		return err
	}
	args := []string{"--stdout", "-v", voice, "-b", "1"}
	if v.Speed > 0 && v.Speed != 1 {
		args = append(args, "-s", strconv.Itoa(int(math.Round(espeakWPM*v.Speed))))
	}
	cmd := exec.CommandContext(ctx, e.path, append(args, "--stdin")...)
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

// voiceFor is the -v of v: its name, which must be one of espeak-ng's;
// else its language (pt-BR: pt-br, else pt) when espeak-ng speaks it; else
// the configured voice.
func (e *Espeak) voiceFor(v Voice) (string, error) {
	if v.Name != "" {
		if !e.known[v.Name] {
			return "", fmt.Errorf("%w: espeak-ng has no voice %q (espeak-ng --voices)", ErrRejected, v.Name)
		}
		return v.Name, nil
	}
	if v.Language != "" {
		tag := strings.ToLower(strings.ReplaceAll(v.Language, "_", "-"))
		base, _, _ := strings.Cut(tag, "-")
		for _, c := range []string{tag, base} {
			if e.known[c] {
				return c, nil
			}
		}
	}
	return e.voice, nil
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
