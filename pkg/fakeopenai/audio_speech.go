package fakeopenai

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
)

// Speech defaults (Kokoro through speaches: 24 kHz mono 16-bit).
const (
	DefaultSpeechRate    = 24000
	DefaultSpeechPerChar = 60 * time.Millisecond
	DefaultSpeechChunk   = 100 * time.Millisecond
	// MaxSpeechInput is OpenAI's limit on input characters.
	MaxSpeechInput = 4096
)

// SpeechConfig shapes the audio /v1/audio/speech returns. Zero fields take
// the defaults.
type SpeechConfig struct {
	// PerChar is the audio per input character at speed 1.
	PerChar time.Duration
	// SampleRate unless the request asks for another (speaches' sample_rate).
	SampleRate int
	// FirstByte is the synthesis time before the first byte of the body.
	FirstByte time.Duration
	// Chunk is the audio in each streamed piece of the body.
	Chunk time.Duration
	// ChunkDelay is the wait between pieces (0: as fast as the client reads).
	ChunkDelay time.Duration
	// Voices are what GET /v1/audio/speech/voices lists (nil: DefaultVoices).
	// With RejectUnknownVoices a speech request naming another voice is
	// answered 400, as a real server answers a voice it does not have.
	Voices              []Voice
	RejectUnknownVoices bool
}

// Voice is one voice of the fake's speech model, as speaches lists it.
type Voice struct {
	ID       string `json:"voice_id"`
	Model    string `json:"model_id,omitempty"`
	Name     string `json:"name,omitempty"`
	Language string `json:"language,omitempty"` // BCP 47
}

// DefaultVoices are a few of Kokoro's voices (the default, af_sarah, first).
var DefaultVoices = []Voice{
	{ID: "af_sarah", Name: "Sarah", Language: "en-US"},
	{ID: "am_adam", Name: "Adam", Language: "en-US"},
	{ID: "bf_emma", Name: "Emma", Language: "en-GB"},
	{ID: "bm_george", Name: "George", Language: "en-GB"},
	{ID: "ff_siwis", Name: "Siwis", Language: "fr-FR"},
	{ID: "ef_dora", Name: "Dora", Language: "es-ES"},
}

// voices answers GET /v1/audio/speech/voices as speaches does: a JSON list
// of the speech model's voices.
func (h *Handler) voices(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	vs := h.audio.speech.Voices
	h.mu.Unlock()
	if vs == nil {
		vs = DefaultVoices
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(vs)
}

// knownVoice reports whether id is one of vs (nil: DefaultVoices).
func knownVoice(vs []Voice, id string) bool {
	if vs == nil {
		vs = DefaultVoices
	}
	for _, v := range vs {
		if v.ID == id {
			return true
		}
	}
	return false
}

func (c SpeechConfig) withDefaults() SpeechConfig {
	if c.PerChar <= 0 {
		c.PerChar = DefaultSpeechPerChar
	}
	if c.SampleRate <= 0 {
		c.SampleRate = DefaultSpeechRate
	}
	if c.Chunk <= 0 {
		c.Chunk = DefaultSpeechChunk
	}
	return c
}

// Duration is the length of the speech for input at speed (0 means 1).
func (c SpeechConfig) Duration(input string, speed float64) time.Duration {
	c = c.withDefaults()
	if speed <= 0 {
		speed = 1
	}
	return time.Duration(float64(len([]rune(input))) * float64(c.PerChar) / speed)
}

// WithSpeech sets the speech configuration a handler starts with.
func WithSpeech(c SpeechConfig) Option { return func(h *Handler) { h.audio.speech = c } }

// SetSpeech changes the speech configuration for later requests.
func (h *Handler) SetSpeech(c SpeechConfig) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audio.speech = c
}

// SpeechRequest is a /v1/audio/speech request as the fake received it.
type SpeechRequest struct {
	Model          string
	Input          string
	Voice          string
	ResponseFormat string
	Speed          float64
	SampleRate     int // as requested (0: not given)
	Instructions   string
	Header         http.Header
	// Rejected is why the fake answered 400 (empty when it spoke).
	Rejected string
}

type wireSpeechRequest struct {
	Model          string  `json:"model"`
	Input          string  `json:"input"`
	Voice          string  `json:"voice"`
	ResponseFormat string  `json:"response_format"`
	Speed          float64 `json:"speed"`
	SampleRate     int     `json:"sample_rate"`
	Instructions   string  `json:"instructions"`
	Stream         *bool   `json:"stream"`
}

func (h *Handler) speak(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	var in wireSpeechRequest
	req := SpeechRequest{Header: r.Header.Clone()}
	param, msg := "", ""
	if err := json.Unmarshal(body, &in); err != nil {
		msg = "decode speech request: " + err.Error()
	} else {
		req = SpeechRequest{Model: in.Model, Input: in.Input, Voice: in.Voice, ResponseFormat: in.ResponseFormat,
			Speed: in.Speed, SampleRate: in.SampleRate, Instructions: in.Instructions, Header: req.Header}
		if req.ResponseFormat == "" {
			req.ResponseFormat = "mp3" // OpenAI's default
		}
		param, msg = checkSpeech(req)
		h.mu.Lock()
		if sc := h.audio.speech; msg == "" && sc.RejectUnknownVoices && !knownVoice(sc.Voices, req.Voice) {
			param, msg = "voice", "voice "+strconv.Quote(req.Voice)+" is not one of the model's voices"
		}
		h.mu.Unlock()
	}
	req.Rejected = msg
	h.record(func() { h.audio.spRequests = append(h.audio.spRequests, req) })
	h.mu.Lock()
	cfg, p := h.audio.speech.withDefaults(), h.profile
	h.mu.Unlock()
	if msg != "" {
		writeParamError(w, param, msg)
		return
	}

	f := h.takeAudioFault(&h.audio.spFault)
	if h.applyFault(w, r, f) {
		return
	}
	if !h.sleep(r.Context(), cfg.FirstByte) {
		dropConnection(w)
		return
	}
	rate := cfg.SampleRate
	if req.SampleRate > 0 {
		rate = req.SampleRate
	}
	speed := req.Speed
	if speed == 0 {
		speed = 1
	}
	total := int(cfg.Duration(req.Input, speed) * time.Duration(rate) / time.Second)
	h.spoke(spokenText{input: req.Input, duration: cfg.Duration(req.Input, speed)})
	syn := newSynth(req.Input, total, rate)
	chunk := max(1, int(cfg.Chunk*time.Duration(rate)/time.Second))
	samples := func(n int) time.Duration { return time.Duration(n) * time.Second / time.Duration(rate) }
	start := time.Now()
	if in.Stream != nil && !*in.Stream && !h.sleep(r.Context(), p.SpeechTime(samples(total))) {
		dropConnection(w) // not streamed: the whole synthesis before the first byte
		return
	}

	w.Header().Set("Content-Type", "audio/"+req.ResponseFormat)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var head []byte
	if req.ResponseFormat == "wav" {
		head = wavHeader(total, rate)
	}
	buf := make([]int16, chunk)
	for i := 0; syn.left() > 0; i++ {
		if i > 0 && (!h.sleep(r.Context(), cfg.ChunkDelay) || !h.sleep(r.Context(), f.ChunkDelay)) {
			dropConnection(w)
			return
		}
		if f.DropAfter > 0 && i == f.DropAfter {
			dropConnection(w)
			return
		}
		// With a timing profile, this chunk's audio is ready when the
		// synthesis has reached it (the chunk delays so far added).
		pause := time.Duration(i) * (cfg.ChunkDelay + f.ChunkDelay)
		if due := start.Add(p.SpeechAudioAt(samples(i*chunk)) + pause); !h.sleep(r.Context(), time.Until(due)) {
			dropConnection(w)
			return
		}
		n := syn.next(buf)
		out := append(head, audio.Bytes(buf[:n])...)
		head = nil
		if _, err := w.Write(out); err != nil || rc.Flush() != nil {
			return
		}
	}
}

// checkSpeech returns the offending parameter and why, or "", "".
func checkSpeech(r SpeechRequest) (param, msg string) {
	switch {
	case r.Model == "":
		return "model", "you must provide a model parameter"
	case r.Input == "":
		return "input", "input must not be empty"
	case len([]rune(r.Input)) > MaxSpeechInput:
		return "input", "input is longer than " + strconv.Itoa(MaxSpeechInput) + " characters"
	case r.Voice == "":
		return "voice", "you must provide a voice parameter"
	case r.ResponseFormat != "pcm" && r.ResponseFormat != "wav":
		return "response_format", "response_format " + strconv.Quote(r.ResponseFormat) + " is not supported by fakeopenai (pcm, wav)"
	case r.Speed != 0 && (r.Speed < 0.25 || r.Speed > 4):
		return "speed", "speed must be between 0.25 and 4.0"
	case r.SampleRate != 0 && (r.SampleRate < 8000 || r.SampleRate > 48000):
		return "sample_rate", "sample_rate must be between 8000 and 48000"
	}
	return "", ""
}

// wavHeader is the 44-byte header of n mono 16-bit samples at rate.
func wavHeader(n, rate int) []byte {
	h := audio.EncodeWAV(nil, rate)
	binary.LittleEndian.PutUint32(h[4:], uint32(36+2*n))
	binary.LittleEndian.PutUint32(h[40:], uint32(2*n))
	return h
}
