package memory_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/memory"
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
		testkit.Missing(b, "no PostgreSQL server: %v", err)
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
