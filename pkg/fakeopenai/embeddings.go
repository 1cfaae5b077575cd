package fakeopenai

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strings"
	"unicode"
)

// featuresPerWord is how many dimensions each word touches; more than one
// keeps two words sharing a bucket from looking identical.
const featuresPerWord = 4

// Embed is the vector the fake returns for text: a signed, hashed bag of
// lower-cased words, L2-normalised. The same text always gets the same
// vector and texts sharing words get a high cosine similarity (two texts
// sharing 3 of 4 words score about 0.87), which is what similarity
// thresholds and near-duplicate checks need in tests.
func Embed(text string, dims int) []float32 {
	v := make([]float64, dims)
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	if len(words) == 0 {
		words = []string{""} // still a unit vector
	}
	for _, w := range words {
		hf := fnv.New64a()
		_, _ = hf.Write([]byte(w))
		x := hf.Sum64()
		for range featuresPerWord {
			x = splitmix(x)
			sign := 1.0
			if x>>63 == 1 {
				sign = -1
			}
			v[x%uint64(dims)] += sign
		}
	}
	var norm float64
	for _, f := range v {
		norm += f * f
	}
	norm = math.Sqrt(norm)
	out := make([]float32, dims)
	for i, f := range v {
		if norm > 0 {
			out[i] = float32(f / norm)
		}
	}
	return out
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (h *Handler) embeddings(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	var in struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     int             `json:"dimensions"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, http.StatusBadRequest, "decode embeddings request: "+err.Error())
		return
	}
	texts, err := decodeInput(in.Input)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if in.EncodingFormat != "" && in.EncodingFormat != "float" && in.EncodingFormat != "base64" {
		writeError(w, http.StatusBadRequest, "encoding_format: want float or base64")
		return
	}
	h.record(func() {
		h.embeds = append(h.embeds, EmbeddingRequest{Model: in.Model, Input: texts, Dimensions: in.Dimensions, EncodingFormat: in.EncodingFormat})
	})
	if h.applyFault(w, r, h.takeFault()) {
		return
	}
	if !h.sleep(r.Context(), h.Profile().EmbeddingsTime(len(texts))) {
		dropConnection(w)
		return
	}

	dims := h.dims
	if in.Dimensions > 0 {
		dims = in.Dimensions
	}
	type item struct {
		Object    string `json:"object"`
		Embedding any    `json:"embedding"`
		Index     int    `json:"index"`
	}
	resp := struct {
		Object string    `json:"object"`
		Data   []item    `json:"data"`
		Model  string    `json:"model"`
		Usage  wireUsage `json:"usage"`
	}{Object: "list", Model: in.Model}
	for i, t := range texts {
		vec := Embed(t, dims)
		var enc any = vec
		if in.EncodingFormat == "base64" {
			enc = encodeBase64(vec)
		}
		resp.Data = append(resp.Data, item{Object: "embedding", Embedding: enc, Index: i})
		resp.Usage.PromptTokens += len(strings.Fields(t))
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	writeJSON(w, http.StatusOK, resp)
}

// encodeBase64 is OpenAI's base64 format: little-endian float32s.
func encodeBase64(vec []float32) string {
	b := make([]byte, 4*len(vec))
	for i, f := range vec {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}
