package fakeopenai

import (
	"net/http"
	"slices"
)

// audioState is what the audio endpoints keep: scripts, recorded requests
// and their own faults. It is guarded by Handler.mu.
type audioState struct {
	transcripts []Transcript // answered in order, one per request
	transcriber Transcriber
	trRequests  []TranscriptionRequest
	trFault     endpointFault

	speech     SpeechConfig
	spRequests []SpeechRequest
	spFault    endpointFault
	// spoken are the latest texts spoken, as HearsItsOwnSpeech knows them.
	spoken []spokenText
}

// endpointFault is a Fault and a FailNext counter for one endpoint. While
// it holds neither, the server-wide fault (SetFault, FailNext) applies, so
// a test can take the whole server down or break just one endpoint.
type endpointFault struct {
	fault      Fault
	failNext   int
	failStatus int
}

// take returns the endpoint's fault for one request and whether it had one.
func (e *endpointFault) take() (Fault, bool) {
	f := e.fault
	set := f != Fault{}
	if e.failNext > 0 {
		e.failNext--
		f.Status = e.failStatus
		set = true
	}
	return f, set
}

// takeAudioFault picks the fault of one audio request: the endpoint's own
// when it has one, the server-wide one otherwise.
func (h *Handler) takeAudioFault(e *endpointFault) Fault {
	h.mu.Lock()
	f, ok := e.take()
	h.mu.Unlock()
	if ok {
		return f
	}
	return h.takeFault()
}

func (h *Handler) mountAudio() {
	h.mux.HandleFunc("POST /v1/audio/transcriptions", h.transcribe)
	h.mux.HandleFunc("POST /v1/audio/speech", h.speak)
	h.mux.HandleFunc("GET /v1/audio/speech/voices", h.voices)
}

func (h *Handler) resetAudio() {
	speech := h.audio.speech
	h.audio = audioState{speech: speech}
}

// SetTranscriptionFault sets what goes wrong for every transcription request
// (Latency is the time the fake "transcribes"); Fault{} returns to the
// server-wide fault.
func (h *Handler) SetTranscriptionFault(f Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audio.trFault.fault = f
}

// FailNextTranscriptions answers the next n transcription requests with
// HTTP status, then recovers.
func (h *Handler) FailNextTranscriptions(n, status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audio.trFault.failNext, h.audio.trFault.failStatus = n, status
}

// SetSpeechFault sets what goes wrong for every speech request (Latency
// delays the first byte, ChunkDelay every later chunk, DropAfter cuts the
// body after that many chunks); Fault{} returns to the server-wide fault.
func (h *Handler) SetSpeechFault(f Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audio.spFault.fault = f
}

// FailNextSpeech answers the next n speech requests with HTTP status, then
// recovers.
func (h *Handler) FailNextSpeech(n, status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audio.spFault.failNext, h.audio.spFault.failStatus = n, status
}

// TranscriptionRequests returns a copy of the transcription requests
// received so far, rejected ones included.
func (h *Handler) TranscriptionRequests() []TranscriptionRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.audio.trRequests)
}

// TranscriptionCount is how many transcription requests arrived.
func (h *Handler) TranscriptionCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.audio.trRequests)
}

// SpeechRequests returns a copy of the speech requests received so far.
func (h *Handler) SpeechRequests() []SpeechRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.audio.spRequests)
}

// SpeechCount is how many speech requests arrived.
func (h *Handler) SpeechCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.audio.spRequests)
}

// writeParamError answers 400 with OpenAI's error envelope naming the
// offending parameter.
func writeParamError(w http.ResponseWriter, param, msg string) {
	type apiError struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   string `json:"param"`
		Code    any    `json:"code"`
	}
	writeJSON(w, http.StatusBadRequest, map[string]apiError{"error": {Message: msg, Type: "invalid_request_error", Param: param}})
}
