package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/memory/internal/store"
)

// benchEmbeddings is an OpenAI-compatible /v1/embeddings server for the
// corpus: input "topic T #N" is answered with a point near topic T (seeded
// by N), so queries land among a user's memories as real ones would.
func benchEmbeddings(b *testing.B, c *benchCorpus) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&in) != nil {
			http.Error(w, `{"error": {"message": "bad request", "type": "invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		out := struct {
			Object string         `json:"object"`
			Model  string         `json:"model"`
			Data   []item         `json:"data"`
			Usage  map[string]int `json:"usage"`
		}{Object: "list", Model: in.Model, Usage: map[string]int{"prompt_tokens": 1, "total_tokens": 1}}
		for i, text := range in.Input {
			var t, n uint64
			fmt.Sscanf(text, "topic %d #%d", &t, &n)
			out.Data = append(out.Data, item{Object: "embedding", Index: i, Embedding: c.vector(rand.New(rand.NewPCG(t, n)), int(t%benchTopics), 0.025)})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	b.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// benchQuery is query n: a user and one of their topics. byRequest picks
// the user in proportion to their memories (users who talk more have more
// memories and search more: the mix a server sees); otherwise users are
// picked uniformly, so the small users, whose filter is the most selective,
// weigh as much as the large one.
func benchQuery(c *benchCorpus, n int, byRequest bool) (user int, text string) {
	rng := rand.New(rand.NewPCG(uint64(n), 99))
	u := rng.IntN(benchUsers)
	if byRequest {
		u = c.user[rng.IntN(benchRows)]
	}
	return u, fmt.Sprintf("topic %d #%d", c.topics[u][rng.IntN(len(c.topics[u]))], n)
}

// BenchmarkSearch100k measures memory.search over 100,000 memories.
//
//	go test -run '^$' -bench Search100k -benchtime 2000x ./services/memory/
//
// rpc: the whole request as the llm service makes it (NATS request, query
// embedding over HTTP from a local server, pinned + HNSW queries, reply),
// for two mixes of users (see benchQuery).
// sql: the Postgres part alone, each query run twice (cold, then hot), with
// the recall of the top 5 against an exact scan.
func BenchmarkSearch100k(b *testing.B) {
	c := newBenchCorpus()
	dbURL := benchDatabase(b, c)
	ns := natstest.Run(b)
	nc := natstest.Connect(b, ns)
	cfg := memory.DefaultConfig()
	cfg.NATSURL, cfg.PostgresURL = ns.ClientURL(), dbURL
	cfg.EmbeddingURL, cfg.EmbeddingModel = benchEmbeddings(b, c), "bench"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- memory.Run(ctx, cfg, zerolog.Nop()) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("memory: %v", err)
		}
	})
	testkit.EventuallyNoError(b, 20*time.Second, func() error {
		_, err := rpc.MemorySearch(context.Background(), nc, rpc.MemorySearchRequest{UserID: "probe"})
		return err
	})

	for _, mix := range []string{"by-request", "by-user"} {
		b.Run("rpc/"+mix, func(b *testing.B) {
			search := func(n int) (rpc.MemorySearchResponse, time.Duration) {
				u, text := benchQuery(c, n, mix == "by-request")
				start := time.Now()
				resp, err := rpc.MemorySearch(context.Background(), nc, rpc.MemorySearchRequest{UserID: benchUser(u), Query: text})
				if err != nil {
					b.Fatal(err)
				}
				return resp, time.Since(start)
			}
			matches := 0
			for n := range 300 { // warm the caches
				resp, _ := search(-1 - n)
				matches += len(resp.Memories) - min(len(resp.Memories), benchPinned)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for n := range b.N {
				_, d := search(n)
				lat = append(lat, d)
			}
			b.StopTimer()
			reportLatency(b, lat, "")
			b.ReportMetric(float64(matches)/300, "matches/query")
		})
	}

	pool, err := store.Open(context.Background(), dbURL, 4)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	for _, mix := range []string{"by-request", "by-user"} {
		b.Run("sql/"+mix, func(b *testing.B) {
			st := store.New(pool, cfg.EfSearch)
			var hits, total int
			for n := range 200 {
				u, v := benchVector(c, -1-n, mix == "by-request")
				got, err := st.Search(context.Background(), store.Query{UserID: benchUser(u), Vector: v, Limit: 5, Threshold: -1})
				if err != nil {
					b.Fatal(err)
				}
				exact := exactTop(b, pool, benchUser(u), v, 5)
				for _, m := range got {
					if slices.Contains(exact, m.ID) {
						hits++
					}
				}
				total += len(exact)
			}
			// hot: the same query again at once, its pages now in shared
			// buffers: what a server whose shared_buffers hold the index
			// would see, without other databases evicting its pages.
			lat, hot := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for n := range b.N {
				u, v := benchVector(c, n, mix == "by-request")
				for _, l := range []*[]time.Duration{&lat, &hot} {
					start := time.Now()
					if _, err := st.Search(context.Background(), store.Query{UserID: benchUser(u), Vector: v, Pinned: 5, Limit: 5, Threshold: 0.35}); err != nil {
						b.Fatal(err)
					}
					*l = append(*l, time.Since(start))
				}
			}
			b.StopTimer()
			reportLatency(b, lat, "")
			reportLatency(b, hot, "hot-")
			b.ReportMetric(float64(hits)/float64(total), "recall@5")
		})
	}
}

// benchVector is query n's user and vector, as the embeddings server makes it.
func benchVector(c *benchCorpus, n int, byRequest bool) (int, []float32) {
	u, text := benchQuery(c, n, byRequest)
	var t, k uint64
	fmt.Sscanf(text, "topic %d #%d", &t, &k)
	return u, c.vector(rand.New(rand.NewPCG(t, k)), int(t%benchTopics), 0.025)
}

// exactTop is the user's k nearest visible memories by an exact scan.
func exactTop(b *testing.B, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, user string, v []float32, k int) []string {
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	if _, err := tx.Exec(ctx, `SET LOCAL enable_indexscan = off`); err != nil {
		b.Fatal(err)
	}
	rows, err := tx.Query(ctx, `SELECT id FROM alicia_memory WHERE user_id = $1 AND NOT archived AND deleted_at IS NULL
		AND embeddings IS NOT NULL ORDER BY embeddings <=> $2 LIMIT $3`, user, pgvector.NewVector(v), k)
	if err != nil {
		b.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

func reportLatency(b *testing.B, lat []time.Duration, prefix string) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), prefix+"p50-ms")
	b.ReportMetric(q(0.99), prefix+"p99-ms")
}
