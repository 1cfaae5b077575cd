package main

import (
	"github.com/spf13/cobra"

	"github.com/alicia-voice/alicia/services/cli/internal/devcmd"
)

// fakeModelsCommand is `alicia dev fake-models`: canned models at the URLs
// `alicia up` uses, to try everything without a GPU.
func fakeModelsCommand() *cobra.Command {
	cfg := devcmd.FakeModelsConfigFromEnv()
	c := &cobra.Command{Use: "fake-models", Short: "Try Alicia without a GPU: serve canned fake models (LLM, ASR, TTS, embeddings) where `alicia up` looks for them",
		Long: `Serves fake OpenAI-compatible model servers, with canned answers that say so, at the URLs
and model names the services use (ALICIA_LLM_URL, ALICIA_ASR_URL, ALICIA_TTS_URL, ALICIA_EMBEDDING_URL
and their ALICIA_*_MODEL, or the defaults: everything on http://127.0.0.1:8000/v1). Backends sharing a
host:port share one listener; only those addresses are bound. Run it in one terminal and ` + "`alicia up`" + ` in
another: chat answers repeat your message, speech is voice-like noise, transcripts are one canned
sentence, embeddings are 1024 hashed dimensions. At the default URLs alicia up uses everything with
nothing to set (it finds the speech and embedding models there); elsewhere it prints the variables
alicia up needs. It runs until Ctrl-C.

--profile gpu-box makes the models take as long as one data-centre GPU would (faster-whisper
large-v3, Qwen2.5-7B-Instruct-AWQ on vLLM, Kokoro-82M, a bge-m3 class embedder): transcription,
time to first token and tokens per second, time to first audio and real-time factor, embeddings.
The figures and their sources: pkg/fakeopenai/README.md. The default, instant, answers at once.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return devcmd.FakeModels(c.Context(), cfg, c.OutOrStdout())
		}}
	f := c.Flags()
	f.StringVar(&cfg.LLM.URL, "llm-url", cfg.LLM.URL, "serve the LLM (chat) at this base URL")
	f.StringVar(&cfg.ASR.URL, "asr-url", cfg.ASR.URL, "serve the ASR (transcriptions) at this base URL")
	f.StringVar(&cfg.TTS.URL, "tts-url", cfg.TTS.URL, "serve the TTS (speech) at this base URL")
	f.StringVar(&cfg.Embeddings.URL, "embedding-url", cfg.Embeddings.URL, "serve the embeddings at this base URL (default: the LLM's)")
	f.Var(devcmd.ProfileFlag{P: &cfg.Profile}, "profile", "model timing: instant, or gpu-box (one data-centre GPU's latencies)")
	return c
}
