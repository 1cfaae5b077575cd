package fakeopenai_test

import (
	"math"
	"slices"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
)

func cosine(a, b []float32) float64 {
	var dot float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
	}
	return dot
}

func embed(t *testing.T, c *openai.Client, req openai.EmbeddingRequest) [][]float32 {
	t.Helper()
	resp, err := c.CreateEmbeddings(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, len(resp.Data))
	for _, d := range resp.Data {
		out[d.Index] = d.Embedding
	}
	return out
}

func TestEmbeddingsDeterministic(t *testing.T) {
	s := fakeopenai.New(t)
	c := client(s, "")
	one := embed(t, c, openai.EmbeddingRequest{Model: "bge-m3", Input: "The user likes green tea."})
	again := embed(t, c, openai.EmbeddingRequest{Model: "bge-m3", Input: []string{"the user LIKES green tea", "x"}})
	if len(one) != 1 || len(again) != 2 || len(one[0]) != fakeopenai.DefaultDims {
		t.Fatalf("shapes: %d, %d, dims %d", len(one), len(again), len(one[0]))
	}
	if !slices.Equal(one[0], again[0]) || !slices.Equal(one[0], fakeopenai.Embed("The user likes green tea.", fakeopenai.DefaultDims)) {
		t.Error("same words gave different vectors")
	}
	if n := cosine(one[0], one[0]); math.Abs(n-1) > 1e-5 {
		t.Errorf("norm² = %f, want 1", n)
	}
	base64 := embed(t, c, openai.EmbeddingRequest{Model: "bge-m3", Input: "The user likes green tea.", EncodingFormat: openai.EmbeddingEncodingFormatBase64})
	if !slices.Equal(one[0], base64[0]) {
		t.Error("base64 encoding changed the vector")
	}
	small := embed(t, c, openai.EmbeddingRequest{Model: "bge-m3", Input: "short", Dimensions: 64})
	if len(small[0]) != 64 {
		t.Errorf("dimensions = %d, want 64", len(small[0]))
	}
	if got := s.EmbeddingRequests(); len(got) != 4 || got[1].Input[1] != "x" || got[0].Model != "bge-m3" {
		t.Errorf("recorded = %+v", got)
	}
}

func TestEmbeddingsSimilarityOrder(t *testing.T) {
	query := fakeopenai.Embed("what tea does the user like", 1024)
	near := fakeopenai.Embed("the user likes green tea", 1024)
	related := fakeopenai.Embed("green tea is healthy", 1024)
	far := fakeopenai.Embed("my flight leaves at nine", 1024)
	cn, cr, cf := cosine(query, near), cosine(query, related), cosine(query, far)
	if !(cn > cr && cr > cf) {
		t.Errorf("similarities near %.3f, related %.3f, far %.3f: want decreasing", cn, cr, cf)
	}
	if dup := cosine(fakeopenai.Embed("User likes coffee", 1024), fakeopenai.Embed("The user likes coffee", 1024)); dup < 0.85 {
		t.Errorf("near-duplicate similarity %.3f, want ≥ 0.85", dup)
	}
	if cf > 0.3 {
		t.Errorf("unrelated similarity %.3f, want near 0", cf)
	}
}
