package persistence_test

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// TestReplicasShareAndSurviveAKill runs three persistence processes on six
// conversation partitions (and SYSTEM's one), SIGKILLs one in the middle of
// a burst of 10,000 envelopes and checks that the two left take its
// partitions over once its leases expire, that every envelope is applied
// exactly once, that a fourth instance joining is handed partitions
// without anything being applied twice, and that a rolling update to
// another partition count hands over rather than mixing the two.
func TestReplicasShareAndSurviveAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills processes; skipped with -short")
	}
	s := newStack(t)
	bin := buildPersistence(t)
	procs := map[string]*exec.Cmd{}
	startWith := func(id, shards string) {
		procs[id] = startPersistence(t, bin, s, "ALICIA_PERSISTENCE_SHARDS="+shards, "ALICIA_PERSISTENCE_LEASE_TTL=2s",
			"ALICIA_PERSISTENCE_INSTANCE="+id)
	}
	start := func(id string) { startWith(id, "6") }
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

	// The victim: an instance applying conversation partitions, well into
	// the burst.
	var killed time.Time
	var victim string
	last := publishBurst(t, s, func(w int) {
		if w != 100 {
			return
		}
		testkit.Eventually(t, 30*time.Second, func() bool {
			err := s.pool.QueryRow(context.Background(), `SELECT owner FROM alicia_stream_offsets
				WHERE stream = $1 AND owner IS NOT NULL AND last_seq > 1000 ORDER BY owner LIMIT 1`, bus.StreamConversations).Scan(&victim)
			return err == nil
		}, "no instance got going")
		held := holders()[victim]
		if err := procs[victim].Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = procs[victim].Wait()
		delete(procs, victim)
		killed = time.Now()
		t.Logf("killed %s holding %d partitions", victim, held)
	})
	var survivors []string
	for _, id := range []string{"r1", "r2", "r3"} {
		if id != victim {
			survivors = append(survivors, id)
		}
	}
	testkit.EventuallyNoError(t, 30*time.Second, spread(survivors...), "the victim's partitions taken over")
	t.Logf("%s's partitions taken over %s after the kill: %v", victim, time.Since(killed).Round(100*time.Millisecond), holders())
	checkBurstApplied(t, s, last)

	// A fourth joins: the others hand it partitions.
	start("r4")
	running := append(survivors, "r4")
	testkit.EventuallyNoError(t, 30*time.Second, spread(running...), "r4 handed partitions")
	t.Logf("after r4 joined: %v", holders())
	checkBurstApplied(t, s, last)
	if n := s.queryInt(`SELECT count(*) FROM alicia_persistence_instances WHERE id = $1 AND seen_at > now() - interval '2 seconds'`, victim); n != 0 {
		t.Errorf("%s still counted as alive", victim)
	}

	// A rolling update to four partitions: the new instance takes nothing
	// while instances split six ways run, then everything once they stop.
	startWith("n1", "4")
	testkit.Eventually(t, 30*time.Second, func() bool {
		// n1 has ticked twice, and every old instance has heartbeated
		// since n1 registered (it has had the chance to hand n1 anything).
		return s.queryInt(`SELECT count(*) FROM alicia_persistence_instances me
			WHERE me.id = 'n1' AND me.seen_at > me.started_at + interval '500 milliseconds'
			AND NOT EXISTS (SELECT 1 FROM alicia_persistence_instances o WHERE o.partitions = 6 AND o.seen_at < me.started_at)`) == 1
	}, "n1 and the old instances heartbeating together")
	if h := holders(); h["n1"] != 0 {
		t.Fatalf("n1 took partitions while instances split six ways run: %v", h)
	}
	for _, id := range running {
		if err := procs[id].Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := procs[id].Wait(); err != nil {
			t.Fatalf("%s did not drain cleanly: %v", id, err)
		}
		delete(procs, id)
	}
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		h := holders()
		if h["n1"] != 5 || len(h) != 1 {
			return fmt.Errorf("held %v, want n1 holding 4 conversation partitions and SYSTEM's", h)
		}
		return nil
	}, "n1 taking over")
	var seq uint64
	for c := range 20 {
		cid := fmt.Sprintf("ac_after%02d", c)
		seq = s.client(cid, 1, &protocol.UserMessage{ID: "am_after" + cid, ConversationID: cid, Content: "still there?"}, nil)
	}
	s.applied(bus.StreamConversations, seq)
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE id LIKE 'am_afterac_after%'`); n != 20 {
		t.Errorf("%d of 20 messages sent after the update stored", n)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_sentences`); n != 15*crashConversations {
		t.Errorf("%d sentences after the update, want %d", n, 15*crashConversations)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE message_role = 'assistant' AND contents = 'S1. S2. S3. S4. S5. S6. S7. S8. S9. S10. S11. S12. S13. S14. S15.'`); n != crashConversations {
		t.Errorf("%d whole answers after the update, want %d", n, crashConversations)
	}
}
