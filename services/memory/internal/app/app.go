// Package app holds the memory service's use cases: search, actions from the
// REST API and from clients, and extraction after a turn. It talks to its
// dependencies through the small interfaces below.
package app

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/memory/internal/models"
	"github.com/alicia-voice/alicia/services/memory/internal/prefetch"
	"github.com/alicia-voice/alicia/services/memory/internal/store"
)

// Embedder turns texts into vectors.
type Embedder interface {
	Model() string
	Embed(ctx context.Context, texts ...string) ([][]float32, error)
}

// Extractor proposes memories from one exchange.
type Extractor interface {
	Extract(ctx context.Context, system, userText, answerText string) ([]models.Candidate, error)
}

// Memories reads alicia_memory and the turns extraction needs.
type Memories interface {
	Get(ctx context.Context, id string) (store.Memory, error)
	Search(ctx context.Context, q store.Query) ([]rpc.Memory, error)
	Nearest(ctx context.Context, userID string, vec []float32) (store.Memory, float64, error)
	Turn(ctx context.Context, answerID string) (store.Turn, error)
}

// Publisher puts envelopes on JetStream (bus.Publisher).
type Publisher interface {
	PublishSystem(ctx context.Context, env protocol.Envelope, msgID string) (*jetstream.PubAck, error)
	PublishServer(ctx context.Context, env protocol.Envelope, msgID string) (*jetstream.PubAck, error)
}

// AppliedFunc waits until persistence has applied stream up to seq (rpc.WaitApplied).
type AppliedFunc func(ctx context.Context, stream string, seq uint64) error

// Settings are the tunables of the use cases.
type Settings struct {
	TopK               int
	MaxTopK            int
	Threshold          float64
	DuplicateThreshold float64
	RatingWeight       float64 // see store.Query
}

// App runs the use cases. Embedder and Extractor are nil when not
// configured; Prefetches is nil when searches are not prefetched.
type App struct {
	Settings  Settings
	Embedder  Embedder
	Extractor Extractor
	Memories  Memories
	// Prompts, when set, give the memory_extraction prompt versions
	// (prompt.go); nil: the built-in prompt.
	Prompts    PromptVersions
	Publisher  Publisher
	Applied    AppliedFunc
	Prefetches *prefetch.Cache
	Log        zerolog.Logger

	// shape is the top-k and threshold prefetched searches ask with: the
	// service's defaults (nil) until a turn's request shows the llm asks
	// with others (learnShape).
	shape atomic.Pointer[searchShape]
}

// searchShape is a search request's top-k and threshold (0: the defaults).
type searchShape struct {
	topK      int
	threshold float64
}

// applied tells the prefetch cache that the memory write with JetStream
// message id msgID, of userID, is applied (searches begun from now on see it).
func (a *App) applied(userID, msgID string) {
	if a.Prefetches != nil {
		a.Prefetches.Confirmed(userID, msgID)
	}
}

// MetaUserID is the envelope meta key of the user (edge.MetaUserID).
const MetaUserID = "alicia.user_id"

// Sources of a memory (memory.source).
const (
	SourceAPI        = "api"
	SourceUser       = "user"
	SourceExtraction = "extraction"
)

// MaxContent caps a memory's content, in runes; embedding models take a
// few thousand tokens at most.
const MaxContent = 4000

// embed returns the vector of one text, classifying failures.
func (a *App) embed(ctx context.Context, texts ...string) ([][]float32, error) {
	vecs, err := a.Embedder.Embed(ctx, texts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return vecs, nil
}

// storeErr marks a Postgres failure as unavailability when the database
// cannot be reached.
func storeErr(err error) error {
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) {
		return fmt.Errorf("%w: postgres: %w", ErrUnavailable, err)
	}
	return err
}

// float64s converts a vector for MemoryAction.memory.embedding.
func float64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, f := range v {
		out[i] = float64(f)
	}
	return out
}

// cosine is the cosine similarity of two vectors.
func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}
