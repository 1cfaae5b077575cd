package vad

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// The Silero VAD (v5): a small neural network that gives the probability
// of speech in each 32 ms window of 16 kHz audio, run by ONNX Runtime. The
// model and the runtime library come from the npm packages deploy/vad
// installs (deploy/vad/README.md: the files and their licences); the
// Docker image copies them to ImageDir.
const (
	// SileroRate is the sample rate the model is run at.
	SileroRate = 16000
	// SileroWindow is the samples of one window (32 ms).
	SileroWindow = 512
	// sileroContext samples of the previous window are given with each
	// one, as the reference wrapper (silero-vad's OnnxWrapper) does: an
	// onset across a window boundary is seen whole.
	sileroContext = 64
	sileroState   = 2 * 1 * 128
)

// Runtime names the ONNX Runtime shared library and the Silero model file.
type Runtime struct {
	Library string
	Model   string
}

// ImageDir holds the runtime in the Docker image (deploy/Dockerfile).
const ImageDir = "/usr/local/lib/alicia/vad"

// ErrNoRuntime: the library or the model is not where it was looked for.
var ErrNoRuntime = errors.New("vad: neural VAD runtime not found")

// FindRuntime returns the runtime: the given paths when set, else ImageDir,
// else deploy/vad/node_modules in the repository holding the working
// directory or the executable (task deps installs it there).
func FindRuntime(library, model string) (Runtime, error) {
	if library != "" || model != "" {
		rt := Runtime{Library: library, Model: model}
		if library == "" || model == "" {
			return rt, fmt.Errorf("%w: set both ALICIA_ONNXRUNTIME_LIB and ALICIA_VAD_MODEL (or neither)", ErrNoRuntime)
		}
		return rt, rt.check()
	}
	cands := []Runtime{{Library: filepath.Join(ImageDir, "libonnxruntime.so.1"), Model: filepath.Join(ImageDir, "silero_vad_v5.onnx")}}
	var roots []string
	if wd, err := os.Getwd(); err == nil {
		roots = append(roots, wd)
	}
	if exe, err := os.Executable(); err == nil {
		roots = append(roots, filepath.Dir(exe))
	}
	for _, r := range roots {
		for dir := r; ; dir = filepath.Dir(dir) {
			if rt, ok := npmRuntime(filepath.Join(dir, "deploy", "vad", "node_modules")); ok {
				cands = append(cands, rt)
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	for _, rt := range cands {
		if rt.check() == nil {
			return rt, nil
		}
	}
	return Runtime{}, fmt.Errorf("%w in %s or deploy/vad/node_modules (run `task deps`, or set ALICIA_ONNXRUNTIME_LIB and ALICIA_VAD_MODEL)", ErrNoRuntime, ImageDir)
}

// npmRuntime is the runtime as npm installs it in modules.
func npmRuntime(modules string) (Runtime, bool) {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if runtime.GOOS != "linux" || arch == "" {
		return Runtime{}, false
	}
	return Runtime{
		Library: filepath.Join(modules, "onnxruntime-node", "bin", "napi-v6", "linux", arch, "libonnxruntime.so.1"),
		Model:   filepath.Join(modules, "@ricky0123", "vad-web", "dist", "silero_vad_v5.onnx"),
	}, true
}

func (rt Runtime) check() error {
	for _, f := range []string{rt.Library, rt.Model} {
		if st, err := os.Stat(f); err != nil || st.IsDir() {
			return fmt.Errorf("%w: %s", ErrNoRuntime, f)
		}
	}
	return nil
}

// ortEnv is the process's one ONNX Runtime environment (it binds one
// library).
var ortEnv struct {
	sync.Mutex
	library string
	err     error
}

func initORT(library string) error {
	ortEnv.Lock()
	defer ortEnv.Unlock()
	if ortEnv.library != "" {
		if ortEnv.library != library {
			return fmt.Errorf("vad: ONNX Runtime already loaded from %s, not %s", ortEnv.library, library)
		}
		return ortEnv.err
	}
	ortEnv.library = library
	ort.SetSharedLibraryPath(library)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		ortEnv.err = fmt.Errorf("vad: load ONNX Runtime %s: %w", library, err)
	}
	return ortEnv.err
}

// Silero is the loaded model: one per process, shared by every stream (a
// session runs concurrent calls).
type Silero struct {
	session *ort.DynamicAdvancedSession
	sr      *ort.Scalar[int64]
	version string
	// mu: windows run under its read lock; Close takes it, so the model is
	// never freed under a window still running (a room's listener may
	// outlive the process's Run by a frame).
	mu     sync.RWMutex
	closed bool
}

// errClosed: the model was closed under a stream.
var errClosed = errors.New("vad: the Silero model is closed")

// LoadSilero loads the model. Each window runs on the calling goroutine's
// thread (one intra-op thread): a voice session's VAD costs one core's
// fraction, never a pool's.
func LoadSilero(rt Runtime) (*Silero, error) {
	if err := rt.check(); err != nil {
		return nil, err
	}
	if err := initORT(rt.Library); err != nil {
		return nil, err
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("vad: session options: %w", err)
	}
	defer func() { _ = opts.Destroy() }()
	if err := opts.SetIntraOpNumThreads(1); err != nil {
		return nil, err
	}
	if err := opts.SetInterOpNumThreads(1); err != nil {
		return nil, err
	}
	session, err := ort.NewDynamicAdvancedSession(rt.Model, []string{"input", "state", "sr"}, []string{"output", "stateN"}, opts)
	if err != nil {
		return nil, fmt.Errorf("vad: load the Silero model %s: %w", rt.Model, err)
	}
	sr, err := ort.NewScalar(int64(SileroRate))
	if err != nil {
		_ = session.Destroy()
		return nil, err
	}
	return &Silero{session: session, sr: sr, version: ort.GetVersion()}, nil
}

// RuntimeVersion is the ONNX Runtime version loaded.
func (s *Silero) RuntimeVersion() string { return s.version }

// Close frees the model once no window runs; a stream's later windows get
// an error (its detector falls back to the energy VAD).
func (s *Silero) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	_ = s.session.Destroy()
	_ = s.sr.Destroy()
}

// SileroStream is the model's state for one audio stream (one participant).
// Not safe for concurrent use.
type SileroStream struct {
	m      *Silero
	input  *ort.Tensor[float32] // context + window
	state  *ort.Tensor[float32]
	output *ort.Tensor[float32]
	stateN *ort.Tensor[float32]
}

// Stream starts a stream with a fresh state.
func (s *Silero) Stream() (*SileroStream, error) {
	st := &SileroStream{m: s}
	var err error
	if st.input, err = ort.NewEmptyTensor[float32](ort.NewShape(1, sileroContext+SileroWindow)); err != nil {
		return nil, err
	}
	if st.state, err = ort.NewEmptyTensor[float32](ort.NewShape(2, 1, 128)); err != nil {
		st.Close()
		return nil, err
	}
	if st.output, err = ort.NewEmptyTensor[float32](ort.NewShape(1, 1)); err != nil {
		st.Close()
		return nil, err
	}
	if st.stateN, err = ort.NewEmptyTensor[float32](ort.NewShape(2, 1, 128)); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// Prob runs one window (SileroWindow samples at 16 kHz) and returns the
// probability that it holds speech.
func (st *SileroStream) Prob(window []int16) (float32, error) {
	if len(window) != SileroWindow {
		return 0, fmt.Errorf("vad: a Silero window is %d samples, not %d", SileroWindow, len(window))
	}
	in := st.input.GetData()
	for i, v := range window {
		in[sileroContext+i] = float32(v) / 32768
	}
	st.m.mu.RLock()
	defer st.m.mu.RUnlock()
	if st.m.closed {
		return 0, errClosed
	}
	if err := st.m.session.Run([]ort.Value{st.input, st.state, st.m.sr}, []ort.Value{st.output, st.stateN}); err != nil {
		return 0, fmt.Errorf("vad: Silero: %w", err)
	}
	copy(st.state.GetData(), st.stateN.GetData())
	// The next window's context: this one's last samples.
	copy(in[:sileroContext], in[SileroWindow:])
	return st.output.GetData()[0], nil
}

// Reset starts the stream again (silence before it).
func (st *SileroStream) Reset() {
	clear(st.state.GetData())
	clear(st.input.GetData())
}

// Close frees the stream's tensors.
func (st *SileroStream) Close() {
	for _, t := range []*ort.Tensor[float32]{st.input, st.state, st.output, st.stateN} {
		if t != nil {
			_ = t.Destroy()
		}
	}
}
