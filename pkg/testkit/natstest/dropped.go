package natstest

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// Dropped publishes data on subject and waits until the route of table
// (bus.Routes) has counted it as dropped for reason (one of bus.Drop*) and
// logged the warning, with the subject, the route and the reason, into
// logs (the table's logger writes there).
func Dropped(t testing.TB, nc *nats.Conn, logs *testkit.SyncBuffer, table, route, reason, subject string, data []byte) {
	t.Helper()
	before := bus.Dropped(table, route)
	if err := nc.Publish(subject, data); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return bus.Dropped(table, route) == before+1 }, table+"/"+route+": the malformed message counted")
	want := []string{`"level":"warn"`, `"routes":"` + table + `"`, `"route":"` + route + `"`, `"subject":"` + subject + `"`, `"reason":"` + reason + `"`}
	testkit.Eventually(t, 5*time.Second, func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			if containsAll(line, want) {
				return true
			}
		}
		return false
	}, table+"/"+route+": the malformed message logged")
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
