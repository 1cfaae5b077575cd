// Package fakeopenai is an in-process server that speaks the OpenAI HTTP
// wire format closely enough for github.com/sashabaranov/go-openai and the
// services built on it: chat completions (JSON and SSE streaming, with
// reasoning_content and tool calls streamed the way OpenAI and vLLM stream
// them), deterministic embeddings, the model list, and the audio endpoints
// of speaches: transcriptions (a WAV upload, checked and parsed; scripted
// transcripts in json, text or verbose_json) and speech (24 kHz voice-like
// PCM or WAV, as long as the text, streamed in chunks).
//
// Tests script the answers: a Script is a list of Turns, picked by a Matcher
// on the request or consumed in order, and every chat request is recorded so
// a test can assert on the context a service sent. Faults (latency, per-chunk
// delay, HTTP errors, hangs, a dead backend) can be switched at runtime.
//
// The models are instant unless a Profile says how long they take
// (WithProfile, SetProfile): transcription per second of audio, time to
// first token and tokens per second, time to first audio and real-time
// factor, embeddings per input. GPUBox reproduces one data-centre GPU from
// published figures; README.md gives them and their sources.
//
// New starts an httptest server for a test; NewHandler gives the bare
// http.Handler for benchmarks and commands (`alicia dev fake-models` serves
// one for hours: WithResponder makes its answers, WithoutRecording keeps its
// memory flat).
package fakeopenai
