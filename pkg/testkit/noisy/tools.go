package noisy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// genVersion changes whenever a generator changes what it makes, so old
// cache entries are not used.
const genVersion = "noisy/1"

// toolset maps each tool a generator runs to its resolved path and version.
type toolset map[string]tool

type tool struct{ path, version string }

var (
	versionsMu sync.Mutex
	versions   = map[string]string{} // resolved path → version line
)

// requireTools finds the tools by name on PATH with their versions; a
// missing one is testkit.Missing (fail under CI=true, skip elsewhere).
func requireTools(t testing.TB, names ...string) (toolset, bool) {
	t.Helper()
	ts := toolset{}
	for _, name := range names {
		path, err := exec.LookPath(name)
		if err != nil {
			testkit.Missing(t, "noisy: %s is not installed (task deps installs it): %v", name, err)
			return nil, false
		}
		v, err := version(path)
		if err != nil {
			t.Fatalf("noisy: %s --version: %v", path, err)
			return nil, false
		}
		ts[name] = tool{path: path, version: v}
	}
	return ts, true
}

func version(path string) (string, error) {
	versionsMu.Lock()
	defer versionsMu.Unlock()
	if v, ok := versions[path]; ok {
		return v, nil
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	// espeak-ng adds where its data lives: keep only the version.
	line, _, _ = strings.Cut(line, "  Data at:")
	versions[path] = strings.TrimSpace(line)
	return versions[path], nil
}

// generated counts cache misses (generations), for the cache's test.
var generated atomic.Int64

var (
	keyLocksMu sync.Mutex
	keyLocks   = map[string]*sync.Mutex{}
)

func keyLock(k string) *sync.Mutex {
	keyLocksMu.Lock()
	defer keyLocksMu.Unlock()
	if keyLocks[k] == nil {
		keyLocks[k] = &sync.Mutex{}
	}
	return keyLocks[k]
}

// cacheDir is os.UserCacheDir()/alicia/noisy, read on each call so a test
// can point XDG_CACHE_HOME elsewhere.
func cacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "alicia", "noisy")
	return dir, os.MkdirAll(dir, 0o755)
}

// cacheKey names the file holding what key made with tools.
func cacheKey(tools toolset, key string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", genVersion, runtime.GOARCH, key)
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s=%s\x00", n, tools[n].version)
	}
	return hex.EncodeToString(h.Sum(nil))[:32] + ".wav"
}

// cached returns the audio key names, from the cache or made by gen and
// stored (written to a temporary file and renamed, so a reader never sees
// half a file). Without a usable cache directory it just runs gen.
func cached(tools toolset, key string, gen func() ([]int16, error)) ([]int16, error) {
	dir, err := cacheDir()
	if err != nil {
		generated.Add(1)
		return gen()
	}
	name := filepath.Join(dir, cacheKey(tools, key))
	mu := keyLock(name)
	mu.Lock()
	defer mu.Unlock()
	if b, err := os.ReadFile(name); err == nil {
		if w, err := audio.ParseWAV(b); err == nil && w.SampleRate == Rate && w.Channels == 1 {
			return w.Samples, nil
		}
	}
	generated.Add(1)
	pcm, err := gen()
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".tmp-*.wav")
	if err != nil {
		return pcm, nil
	}
	_, werr := f.Write(audio.EncodeWAV(pcm, Rate))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil || os.Rename(f.Name(), name) != nil {
		_ = os.Remove(f.Name()) // a leftover temporary file only costs disk
	}
	return pcm, nil
}

// sox runs sox in repeatable mode (-R: fixed random seeds) without dither
// (-D), from the null file at inRate Hz with channels channels, writing raw
// 16 kHz mono PCM; args are its effects (synth, remix, …).
func (ts toolset) sox(inRate, channels int, args ...string) ([]int16, error) {
	cmd := append([]string{"-R", "-D", "-r", strconv.Itoa(inRate), "-c", strconv.Itoa(channels), "-n",
		"-r", strconv.Itoa(Rate), "-c", "1", "-b", "16", "-e", "signed-integer", "-L", "-t", "raw", "-"}, args...)
	return run(exec.Command(ts["sox"].path, cmd...), func(out []byte) ([]int16, error) {
		if len(out)%2 != 0 {
			return nil, errors.New("odd byte count")
		}
		return audio.Samples(out), nil
	})
}

// espeak runs espeak-ng (voice, words per minute, pitch 0–99) and returns
// what it says at Rate, silence included.
func (ts toolset) espeak(voice string, speed, pitch int, text string) ([]int16, error) {
	args := []string{"--stdout", "-v", voice}
	if speed > 0 {
		args = append(args, "-s", strconv.Itoa(speed))
	}
	if pitch > 0 {
		args = append(args, "-p", strconv.Itoa(pitch))
	}
	args = append(args, "--", text)
	return run(exec.Command(ts["espeak-ng"].path, args...), func(out []byte) ([]int16, error) {
		w, err := audio.ParseWAV(out)
		if err != nil {
			return nil, err
		}
		return audio.Resample(w.Mono(), w.SampleRate, Rate)
	})
}

func run(cmd *exec.Cmd, parse func([]byte) ([]int16, error)) ([]int16, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	pcm, err := parse(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	return pcm, nil
}
