package memory_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/memory/internal/store"
)

// The benchmark corpus: 100,000 memories of 10 users with a Zipf-like
// spread (the largest user owns a third, the smallest about 3%), on 2,000
// topics. A memory is its topic's centre plus noise, normalised, so two
// memories of a topic have a cosine similarity of about 0.5–0.7 and
// unrelated ones about 0 — the shape of real sentence embeddings rather
// than uniform noise. 5 pinned memories per user, 5% archived, 2% deleted.
const (
	benchRows    = 100_000
	benchUsers   = 10
	benchTopics  = 2_000
	benchPinned  = 5
	benchVersion = "corpus-v1" // change when the generator changes
)

// benchCorpus is the deterministic layout of the corpus; vectors are made
// from it on demand.
type benchCorpus struct {
	centers [][]float32
	user    []int // per row
	topic   []int // per row
	topics  [][]int
}

func newBenchCorpus() *benchCorpus {
	rng := rand.New(rand.NewPCG(1, 2))
	c := &benchCorpus{user: make([]int, benchRows), topic: make([]int, benchRows), topics: make([][]int, benchUsers)}
	for range benchTopics {
		v := make([]float32, memory.Dimensions)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		c.centers = append(c.centers, normalize(v))
	}
	weights := make([]float64, benchUsers)
	var sum float64
	for u := range weights {
		weights[u] = 1 / float64(u+1)
		sum += weights[u]
	}
	for i := range benchRows {
		x, u := rng.Float64()*sum, 0
		for ; u < benchUsers-1 && x > weights[u]; u++ {
			x -= weights[u]
		}
		c.user[i], c.topic[i] = u, rng.IntN(benchTopics)
		c.topics[u] = append(c.topics[u], c.topic[i])
	}
	return c
}

// vector is a point near topic t: the centre plus noise of norm sigma·32.
func (c *benchCorpus) vector(rng *rand.Rand, t int, sigma float64) []float32 {
	v := slices.Clone(c.centers[t])
	for i := range v {
		v[i] += float32(rng.NormFloat64() * sigma)
	}
	return normalize(v)
}

func normalize(v []float32) []float32 {
	var n float64
	for _, f := range v {
		n += float64(f) * float64(f)
	}
	n = math.Sqrt(n)
	for i := range v {
		v[i] = float32(float64(v[i]) / n)
	}
	return v
}

func benchUser(u int) string { return "bench_user_" + strconv.Itoa(u) }

// benchDatabase returns the URL of the loaded corpus database. It is kept
// on the server between runs under a name derived from the migrations and
// the corpus version, and built (≈ a few minutes) only when missing.
func benchDatabase(b *testing.B, c *benchCorpus) string {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	admin, err := localpg.Ensure(ctx, localpg.Options{Log: io.Discard})
	if err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("no PostgreSQL server: %v", err)
		}
		b.Skipf("no PostgreSQL server: %v", err)
	}
	name := "alicia_bench_mem100k_" + benchKey(b)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	var found bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&found); err != nil {
		b.Fatal(err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		b.Fatal(err)
	}
	if !found {
		build := name + "_build"
		for _, q := range []string{"DROP DATABASE IF EXISTS " + ident(build) + " WITH (FORCE)", "CREATE DATABASE " + ident(build)} {
			if _, err := conn.Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		u.Path = "/" + build
		start := time.Now()
		if err := loadBenchCorpus(ctx, u.String(), c); err != nil {
			b.Fatalf("load corpus: %v", err)
		}
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(build)+" RENAME TO "+ident(name)); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "corpus loaded into %s in %s\n", name, time.Since(start).Round(time.Second))
		dropStaleBenchDatabases(ctx, conn, name)
	}
	u.Path = "/" + name
	return u.String()
}

// benchKey names the corpus: the migrations and the generator version.
func benchKey(b *testing.B) string {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(migrations.FS, path)
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(data))
		h.Write(data)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	h.Write([]byte(benchVersion))
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func dropStaleBenchDatabases(ctx context.Context, conn *pgx.Conn, keep string) {
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'alicia\_bench\_mem100k\_%' AND datname <> $1`, keep)
	if err != nil {
		return
	}
	names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	for _, n := range names {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(n)+" WITH (FORCE)")
	}
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// loadBenchCorpus migrates the database at dbURL and writes the corpus with
// COPY, playing persistence, then builds the HNSW index once, as bulk loads
// should.
func loadBenchCorpus(ctx context.Context, dbURL string, c *benchCorpus) error {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	db := stdlib.OpenDB(*cfg)
	err = migrations.Up(ctx, db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := pgxvec.RegisterTypes(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `DROP INDEX idx_memory_embeddings_hnsw`); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	pinned := make([]int, benchUsers)
	i := 0
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"alicia_memory"},
		[]string{"id", "user_id", "content", "embeddings", "embeddings_info", "importance", "tags", "pinned", "archived",
			"source_type", "created_at", "updated_at", "deleted_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == benchRows {
				return nil, nil
			}
			u, t := c.user[i], c.topic[i]
			at := base.Add(time.Duration(i) * time.Minute)
			isPinned := pinned[u] < benchPinned
			if isPinned {
				pinned[u]++
			}
			var deleted *time.Time
			if rng.Float64() < 0.02 {
				deleted = &at
			}
			row := []any{
				fmt.Sprintf("amem_bench%07d", i), benchUser(u),
				fmt.Sprintf("Memory %d of %s about topic %d: a sentence of ordinary length about the user's life.", i, benchUser(u), t),
				pgvector.NewVector(c.vector(rng, t, 0.015+rng.Float64()*0.025)), `{"model": "bench", "dims": 1024}`,
				0.3 + 0.6*rng.Float64(), []string{"topic" + strconv.Itoa(t%50)}, isPinned, !isPinned && rng.Float64() < 0.05,
				"extraction", at, at, deleted,
			}
			i++
			return row, nil
		}))
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	for _, q := range []string{
		`SET maintenance_work_mem = '2GB'`,
		`SET max_parallel_maintenance_workers = 2`,
		`CREATE INDEX idx_memory_embeddings_hnsw ON alicia_memory USING hnsw (embeddings vector_cosine_ops)`,
		`VACUUM ANALYZE alicia_memory`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

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
