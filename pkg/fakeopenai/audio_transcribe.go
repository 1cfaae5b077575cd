package fakeopenai

import (
	"bytes"
	"compress/zlib"
	"errors"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/alicia-voice/alicia/pkg/audio"
)

// Transcription defaults and limits.
const (
	// DefaultTranscript is what the fake hears in speech nobody scripted.
	DefaultTranscript = "Hello Alicia, what is the weather like today?"
	// DefaultAvgLogprob and DefaultNoSpeechProb are the statistics of
	// segments the fake makes up: a clear recording (confidence about 0.77).
	DefaultAvgLogprob   = -0.25
	DefaultNoSpeechProb = 0.02
	// SilenceDBFS: audio quieter than this is silence to the default
	// transcriber, which then hears nothing (as speaches with its VAD filter).
	SilenceDBFS = -60.0
	// MinTranscriptionAudio is OpenAI's minimum; shorter uploads get a 400.
	MinTranscriptionAudio = 100 * time.Millisecond
	// MaxTranscriptionUpload is OpenAI's upload limit; larger ones get a 413.
	MaxTranscriptionUpload = 25 << 20
)

// TranscriptionRequest is a /v1/audio/transcriptions request as the fake
// received it, with the uploaded WAV parsed so a test can assert that the
// audio it sent is the speech it expected.
type TranscriptionRequest struct {
	Model                  string
	Language               string
	Prompt                 string
	ResponseFormat         string // "json" when the client sent none
	Temperature            float64
	TimestampGranularities []string
	Filename               string
	Header                 http.Header

	SampleRate int
	Channels   int
	Duration   time.Duration
	Samples    []int16 // down-mixed to mono
	LevelDBFS  float64 // RMS level of Samples

	// Rejected is why the fake answered 400 (empty when it transcribed).
	Rejected string
}

// Transcript is one scripted transcription answer.
type Transcript struct {
	// Text is the transcript; when empty it is the segments' texts joined.
	Text string
	// Language reported (speaches says "en", OpenAI "english"); default:
	// the request's language, else "en".
	Language string
	// Segments default (nil) to one per sentence of Text with
	// DefaultAvgLogprob and DefaultNoSpeechProb. Segments whose Start and
	// End are both zero are spread over the audio by their text's length.
	Segments []Segment
	// Latency is how long this request takes, on top of any fault.
	Latency time.Duration
	// Hang holds this request until the client gives up.
	Hang bool
	// Status, when non-zero, answers this request with that HTTP error.
	Status int
}

// Segment is one verbose_json segment.
type Segment struct {
	Start, End       time.Duration
	Text             string
	AvgLogprob       float64
	NoSpeechProb     float64
	CompressionRatio float64 // computed from Text when zero
	Temperature      float64
}

// Transcriber answers a transcription request; see SetTranscriber.
type Transcriber func(TranscriptionRequest) Transcript

// Growing is a transcriber whose transcript grows with the audio: one word
// of text per perWord of audio (at least one word, at most all), as the
// partial transcripts of an utterance do while it is spoken.
func Growing(text string, perWord time.Duration) Transcriber {
	words := strings.Fields(text)
	return func(r TranscriptionRequest) Transcript {
		n := int((r.Duration + perWord - 1) / perWord)
		n = max(1, min(n, len(words)))
		return Transcript{Text: strings.Join(words[:n], " ")}
	}
}

// defaultTranscriber hears DefaultTranscript in any audio but silence.
func defaultTranscriber(r TranscriptionRequest) Transcript {
	if r.LevelDBFS < SilenceDBFS {
		return Transcript{}
	}
	return Transcript{Text: DefaultTranscript}
}

// EnqueueTranscripts adds transcripts answered in order, one per request,
// before the transcriber is asked.
func (h *Handler) EnqueueTranscripts(ts ...Transcript) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audio.transcripts = append(h.audio.transcripts, ts...)
}

// SetTranscriber answers requests no queued transcript takes; nil restores
// the default (DefaultTranscript, or nothing for silence).
func (h *Handler) SetTranscriber(f Transcriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audio.transcriber = f
}

func (h *Handler) nextTranscript(req TranscriptionRequest) Transcript {
	h.mu.Lock()
	var f Transcriber
	if len(h.audio.transcripts) > 0 {
		t := h.audio.transcripts[0]
		h.audio.transcripts = h.audio.transcripts[1:]
		h.mu.Unlock()
		return t
	}
	f = h.audio.transcriber
	h.mu.Unlock()
	if f == nil {
		f = defaultTranscriber
	}
	return f(req)
}

func (h *Handler) transcribe(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxTranscriptionUpload+1<<20)
	req, status, err := readTranscriptionRequest(r)
	if err != nil {
		if status == 0 {
			status = http.StatusBadRequest
		}
		req.Rejected = err.Error()
	}
	h.record(func() { h.audio.trRequests = append(h.audio.trRequests, req) })
	if err != nil {
		writeError(w, status, err.Error())
		return
	}

	f := h.takeAudioFault(&h.audio.trFault)
	if h.applyFault(w, r, f) {
		return
	}
	t := h.nextTranscript(req)
	if t.Hang {
		h.applyFault(w, r, Fault{Hang: true})
		return
	}
	if !h.sleep(r.Context(), t.Latency+h.Profile().TranscriptionTime(req.Duration)) {
		dropConnection(w)
		return
	}
	if t.Status != 0 {
		writeError(w, t.Status, http.StatusText(t.Status)+" (scripted by fakeopenai)")
		return
	}
	v := verbose(req, t)
	switch req.ResponseFormat {
	case "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, v.Text)
	case "verbose_json":
		writeJSON(w, http.StatusOK, v)
	default:
		writeJSON(w, http.StatusOK, map[string]string{"text": v.Text})
	}
}

// readTranscriptionRequest parses and checks the multipart form; the status
// is 0 for a plain 400.
func readTranscriptionRequest(r *http.Request) (TranscriptionRequest, int, error) {
	req := TranscriptionRequest{Header: r.Header.Clone()}
	if err := r.ParseMultipartForm(1 << 20); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return req, http.StatusRequestEntityTooLarge, errors.New("Maximum content size limit (26214400) exceeded.")
		}
		return req, 0, errors.New("could not parse multipart form: " + err.Error())
	}
	defer func() { _ = r.MultipartForm.RemoveAll() }()
	form := r.MultipartForm.Value
	get := func(k string) string {
		if v := form[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	req.Model, req.Language, req.Prompt = get("model"), get("language"), get("prompt")
	req.ResponseFormat = get("response_format")
	req.TimestampGranularities = append(form["timestamp_granularities[]"], form["timestamp_granularities"]...)
	if req.ResponseFormat == "" {
		req.ResponseFormat = "json"
	}
	if req.Model == "" {
		return req, 0, errors.New("you must provide a model parameter")
	}
	switch req.ResponseFormat {
	case "json", "text", "verbose_json":
	default:
		return req, 0, errors.New("response_format: fakeopenai supports json, text and verbose_json, not " + strconv.Quote(req.ResponseFormat))
	}
	for _, g := range req.TimestampGranularities {
		if g != "segment" && g != "word" {
			return req, 0, errors.New("timestamp_granularities: want segment or word, not " + strconv.Quote(g))
		}
	}
	if t := get("temperature"); t != "" {
		v, err := strconv.ParseFloat(t, 64)
		if err != nil || v < 0 || v > 1 {
			return req, 0, errors.New("temperature: want a number between 0 and 1")
		}
		req.Temperature = v
	}
	files := r.MultipartForm.File["file"]
	if len(files) == 0 {
		return req, 0, errors.New("you must provide a file parameter")
	}
	req.Filename = files[0].Filename
	if files[0].Size > MaxTranscriptionUpload {
		return req, http.StatusRequestEntityTooLarge, errors.New("Maximum content size limit (26214400) exceeded.")
	}
	f, err := files[0].Open()
	if err != nil {
		return req, 0, err
	}
	defer f.Close() //nolint:errcheck // an uploaded part, only read
	data, err := io.ReadAll(f)
	if err != nil {
		return req, 0, err
	}
	wav, err := audio.ParseWAV(data)
	if err != nil {
		return req, 0, errors.New("Invalid file format: fakeopenai accepts 16-bit PCM WAV only (" + err.Error() + ")")
	}
	req.SampleRate, req.Channels, req.Duration = wav.SampleRate, wav.Channels, wav.Duration()
	req.Samples = wav.Mono()
	req.LevelDBFS = audio.DBFS(req.Samples)
	if req.Duration < MinTranscriptionAudio {
		return req, 0, errors.New("Audio file is too short. Minimum audio length is 0.1 seconds.")
	}
	return req, 0, nil
}

type wireSegment struct {
	ID               int     `json:"id"`
	Seek             int     `json:"seek"`
	Start            float64 `json:"start"`
	End              float64 `json:"end"`
	Text             string  `json:"text"`
	Tokens           []int   `json:"tokens"`
	Temperature      float64 `json:"temperature"`
	AvgLogprob       float64 `json:"avg_logprob"`
	CompressionRatio float64 `json:"compression_ratio"`
	NoSpeechProb     float64 `json:"no_speech_prob"`
}

type wireWord struct {
	Word  string  `json:"word"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

type wireVerbose struct {
	Task     string        `json:"task"`
	Language string        `json:"language"`
	Duration float64       `json:"duration"`
	Text     string        `json:"text"`
	Segments []wireSegment `json:"segments"`
	Words    []wireWord    `json:"words,omitempty"`
}

// verbose builds the verbose_json answer of t for req.
func verbose(req TranscriptionRequest, t Transcript) wireVerbose {
	segs := t.Segments
	if segs == nil {
		for _, s := range sentences(t.Text) {
			segs = append(segs, Segment{Text: s, AvgLogprob: DefaultAvgLogprob, NoSpeechProb: DefaultNoSpeechProb})
		}
	}
	segs = spread(segs, req.Duration)
	v := wireVerbose{Task: "transcribe", Language: t.Language, Duration: round3(req.Duration.Seconds()), Segments: []wireSegment{}}
	if v.Language == "" {
		v.Language = req.Language
	}
	if v.Language == "" {
		v.Language = "en"
	}
	words := false
	for _, g := range req.TimestampGranularities {
		words = words || g == "word"
	}
	var text strings.Builder
	for i, s := range segs {
		body := " " + strings.TrimSpace(s.Text)
		text.WriteString(body)
		cr := s.CompressionRatio
		if cr == 0 {
			cr = compressionRatio(body)
		}
		v.Segments = append(v.Segments, wireSegment{
			ID: i, Seek: int(s.Start/(30*time.Second)) * 3000, Start: round3(s.Start.Seconds()), End: round3(s.End.Seconds()),
			Text: body, Tokens: tokens(body), Temperature: s.Temperature, AvgLogprob: s.AvgLogprob,
			CompressionRatio: cr, NoSpeechProb: s.NoSpeechProb,
		})
		if words {
			ws := strings.Fields(body)
			for j, wd := range ws {
				step := (s.End - s.Start) / time.Duration(len(ws))
				start := s.Start + time.Duration(j)*step
				v.Words = append(v.Words, wireWord{Word: wd, Start: round3(start.Seconds()), End: round3((start + step).Seconds())})
			}
		}
	}
	v.Text = t.Text
	if v.Text == "" {
		v.Text = strings.TrimSpace(text.String())
	}
	return v
}

// sentences splits text after ., ! and ? followed by a space.
func sentences(text string) []string {
	var out []string
	rs := []rune(strings.TrimSpace(text))
	start := 0
	for i, r := range rs {
		if (r == '.' || r == '!' || r == '?') && i+1 < len(rs) && unicode.IsSpace(rs[i+1]) {
			out = append(out, strings.TrimSpace(string(rs[start:i+1])))
			start = i + 1
		}
	}
	if rest := strings.TrimSpace(string(rs[start:])); rest != "" {
		out = append(out, rest)
	}
	return out
}

// spread gives segments without times a share of d proportional to their
// text's length.
func spread(segs []Segment, d time.Duration) []Segment {
	out := make([]Segment, len(segs))
	copy(out, segs)
	total := 0
	for _, s := range out {
		total += max(1, len([]rune(s.Text)))
	}
	at, used := time.Duration(0), 0
	for i := range out {
		used += max(1, len([]rune(out[i].Text)))
		end := time.Duration(int64(d) * int64(used) / int64(max(total, 1)))
		if out[i].Start == 0 && out[i].End == 0 {
			out[i].Start, out[i].End = at, end
		}
		at = end
	}
	return out
}

// compressionRatio is Whisper's: text bytes over zlib-compressed bytes.
func compressionRatio(s string) float64 {
	var b bytes.Buffer
	zw := zlib.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return round3(float64(len(s)) / float64(max(b.Len(), 1)))
}

// tokens makes up one token id per word, below Whisper's vocabulary size.
func tokens(s string) []int {
	out := []int{}
	for _, w := range strings.Fields(s) {
		hf := fnv.New32a()
		_, _ = hf.Write([]byte(w))
		out = append(out, int(hf.Sum32()%50000))
	}
	return out
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
