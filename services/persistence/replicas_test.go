package persistence_test

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// TestReplicasShareAndSurviveAKill runs three persistence processes on six
// conversation partitions (and SYSTEM's one), SIGKILLs one in the middle of
// a burst of 10,000 envelopes and checks that the two left take its
// partitions over once its leases expire, that every envelope is applied
// exactly once, and that a fourth instance joining is handed partitions
// without anything being applied twice.
func TestReplicasShareAndSurviveAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills processes; skipped with -short")
	}
	s := newStack(t)
	bin := buildPersistence(t)
	procs := map[string]*exec.Cmd{}
	start := func(id string) {
		procs[id] = startPersistence(t, bin, s, "ALICIA_PERSISTENCE_SHARDS=6", "ALICIA_PERSISTENCE_LEASE_TTL=2s",
			"ALICIA_PERSISTENCE_INSTANCE="+id)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	})
	for _, id := range []string{"r1", "r2", "r3"} {
		start(id)
	}
	// holders counts the partitions each instance holds, by the database.
	holders := func() map[string]int {
		out := map[string]int{}
		rows, err := s.pool.Query(context.Background(), `SELECT coalesce(owner, ''), count(*) FROM alicia_stream_offsets
			WHERE lease_expires_at > now() GROUP BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var owner string
			var n int
			if err := rows.Scan(&owner, &n); err != nil {
				t.Fatal(err)
			}
			out[owner] = n
		}
		return out
	}
	spread := func(ids ...string) func() error {
		return func() error {
			h := holders()
			total := 0
			for _, id := range ids {
				if h[id] == 0 {
					return fmt.Errorf("%s holds nothing: %v", id, h)
				}
				total += h[id]
			}
			if total != 7 || len(h) != len(ids) {
				return fmt.Errorf("partitions held %v, want all 7 held by %v", h, ids)
			}
			return nil
		}
	}
	testkit.EventuallyNoError(t, 30*time.Second, spread("r1", "r2", "r3"), "the partitions spread over three instances")
	t.Logf("three instances: %v", holders())

	var killed time.Time
	last := publishBurst(t, s, func(w int) {
		if w != 100 {
			return
		}
		testkit.Eventually(t, 30*time.Second, func() bool {
			return s.queryInt(`SELECT COALESCE(max(last_seq), 0) FROM alicia_stream_offsets WHERE stream = $1 AND owner = 'r1'`, bus.StreamConversations) > 1000
		}, "r1 never got going")
		if err := procs["r1"].Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = procs["r1"].Wait()
		delete(procs, "r1")
		killed = time.Now()
		t.Logf("killed r1 holding %d partitions", holders()["r1"])
	})
	testkit.EventuallyNoError(t, 30*time.Second, spread("r2", "r3"), "r1's partitions taken over")
	t.Logf("r1's partitions taken over %s after the kill: %v", time.Since(killed).Round(100*time.Millisecond), holders())
	checkBurstApplied(t, s, last)

	// A fourth joins: the others hand it partitions.
	start("r4")
	testkit.EventuallyNoError(t, 30*time.Second, spread("r2", "r3", "r4"), "r4 handed partitions")
	t.Logf("after r4 joined: %v", holders())
	checkBurstApplied(t, s, last)
	if n := s.queryInt(`SELECT count(*) FROM alicia_persistence_instances WHERE id = 'r1' AND seen_at > now() - interval '2 seconds'`); n != 0 {
		t.Errorf("r1 still counted as alive")
	}
}
