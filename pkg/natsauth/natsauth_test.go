package natsauth_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/natsauth"
	"github.com/alicia-voice/alicia/pkg/natsserver"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

var update = flag.Bool("update", false, "rewrite deploy/nats.conf's authorization block")

// startServer runs the embedded server with every user of the table, each
// with the password "pw-<name>".
func startServer(t *testing.T) string {
	t.Helper()
	var users []natsserver.User
	for _, u := range natsauth.Users() {
		users = append(users, natsserver.User{Name: u.Name, Password: "pw-" + u.Name, Permissions: u.Permissions})
	}
	url := "nats://" + testkit.FreeAddr(t)
	s, err := natsserver.Start(natsserver.Options{URL: url, StoreDir: t.TempDir(), Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return url
}

// violations collects the permission violations the server reports to a connection.
type violations struct{ ch chan error }

func (v violations) option() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			select {
			case v.ch <- err:
			default:
			}
		}
	})
}

func connect(t *testing.T, url, user string, v violations) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, js, err := bus.Connect(context.Background(), url, user,
		bus.Credentials{User: user, Password: "pw-" + user}.Option(), v.option())
	if err != nil {
		t.Fatalf("%s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	return nc, js
}

func userMessage(cid string) protocol.Envelope {
	return protocol.Envelope{StanzaID: 1, ConversationID: cid, Type: protocol.TypeUserMessage,
		Body: &protocol.UserMessage{ID: "am_" + cid, ConversationID: cid, Content: "hi"}}
}

// count is how many messages CONVERSATIONS holds on subject.
func count(t *testing.T, js jetstream.JetStream, subject string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// TestServiceCannotSpeakForTheUser: with the generated users on, the tts
// (and any non-edge service) publishing a client envelope gets a
// permissions violation and nothing reaches CONVERSATIONS; the gateway's
// publish of the same envelope is stored.
func TestServiceCannotSpeakForTheUser(t *testing.T) {
	url := startServer(t)
	gv := violations{make(chan error, 1)}
	_, gjs := connect(t, url, natsauth.Gateway, gv)
	for _, user := range []string{natsauth.TTS, natsauth.LLM, natsauth.Memory, natsauth.Persistence} {
		t.Run(user, func(t *testing.T) {
			v := violations{make(chan error, 1)}
			_, js := connect(t, url, user, v)
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			cid := "ac_" + strings.ReplaceAll(user, "-", "")
			if _, err := bus.NewPublisher(js).PublishClient(ctx, userMessage(cid)); err == nil {
				t.Fatal("the publish was acknowledged")
			}
			select {
			case err := <-v.ch:
				if !strings.Contains(err.Error(), subjects.Client(cid, protocol.TypeUserMessage)) {
					t.Fatalf("violation %v does not name the subject", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no permissions violation reported")
			}
			if n := count(t, gjs, subjects.Client(cid, protocol.TypeUserMessage)); n != 0 {
				t.Fatalf("%d messages reached the stream", n)
			}
		})
	}
	if _, err := bus.NewPublisher(gjs).PublishClient(context.Background(), userMessage("ac_gw")); err != nil {
		t.Fatalf("gateway: %v", err)
	}
	if n := count(t, gjs, subjects.Client("ac_gw", protocol.TypeUserMessage)); n != 1 {
		t.Fatalf("gateway's publish: %d messages stored, want 1", n)
	}
}

// TestSystemSubjects: alicia.sys.* changes only from the gateway
// (administrators' settings) and the services that own each type.
func TestSystemSubjects(t *testing.T) {
	url := startServer(t)
	owners := map[protocol.MessageType][]string{
		protocol.TypeToolSetting:      {natsauth.Gateway},
		protocol.TypeMCPServerConfig:  {natsauth.Gateway},
		protocol.TypeMemoryAction:     {natsauth.Memory},
		protocol.TypeToolRegistration: {natsauth.LLM},
		protocol.TypeMCPServerStatus:  {natsauth.LLM},
	}
	for typ, allowed := range owners {
		for _, user := range natsauth.Services() {
			t.Run(typ.Token()+"/"+user, func(t *testing.T) {
				v := violations{make(chan error, 1)}
				nc, _ := connect(t, url, user, v)
				if err := nc.Publish(subjects.System(typ), []byte("x")); err != nil {
					t.Fatal(err)
				}
				err := nc.Flush()
				if err == nil {
					err = nc.LastError()
				}
				denied := false
				select {
				case <-v.ch:
					denied = true
				case <-time.After(200 * time.Millisecond): // a violation arrives with the flush's pong or never
				}
				if want := !slices.Contains(allowed, user); denied != want {
					t.Fatalf("denied = %v, want %v (%v)", denied, want, err)
				}
			})
		}
	}
}

// TestRequestReply: each service can ask the request/reply services it
// uses, and the responders can answer.
func TestRequestReply(t *testing.T) {
	url := startServer(t)
	pnc, _ := connect(t, url, natsauth.Persistence, violations{make(chan error, 1)})
	mnc, _ := connect(t, url, natsauth.Memory, violations{make(chan error, 1)})
	for _, s := range []struct {
		nc      *nats.Conn
		subject string
	}{{pnc, rpc.AppliedSubject}, {pnc, rpc.HistorySubject}, {mnc, rpc.MemorySearchSubject}, {mnc, rpc.MemoryActionSubject}} {
		if _, err := s.nc.Subscribe(s.subject, func(m *nats.Msg) { _ = m.Respond([]byte("ok")) }); err != nil {
			t.Fatal(err)
		}
		if err := s.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for user, asks := range map[string][]string{
		natsauth.Gateway: {rpc.AppliedSubject, rpc.MemorySearchSubject, rpc.MemoryActionSubject},
		natsauth.LLM:     {rpc.HistorySubject, rpc.AppliedSubject, rpc.MemorySearchSubject},
		natsauth.Memory:  {rpc.AppliedSubject},
	} {
		nc, _ := connect(t, url, user, violations{make(chan error, 1)})
		for _, subject := range asks {
			if m, err := nc.Request(subject, nil, 5*time.Second); err != nil || string(m.Data) != "ok" {
				t.Errorf("%s asking %s: %v", user, subject, err)
			}
		}
	}
}

// TestDeployConf: deploy/nats.conf holds the table's authorization block,
// and nats-server reads from it the same users and permissions.
func TestDeployConf(t *testing.T) {
	path := filepath.Join("..", "..", "deploy", "nats.conf")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	if *update {
		head, _, _ := strings.Cut(conf, "# Generated from pkg/natsauth")
		conf = head + natsauth.Conf()
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasSuffix(conf, natsauth.Conf()) {
		t.Fatalf("deploy/nats.conf does not end with natsauth.Conf(): run go test ./pkg/natsauth -run TestDeployConf -update")
	}
	for _, u := range natsauth.Users() {
		t.Setenv(natsauth.PasswordVar(u.Name), "pw-"+u.Name)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*server.User{}
	for _, u := range opts.Users {
		got[u.Username] = u
	}
	for _, u := range natsauth.Users() {
		g := got[u.Name]
		if g == nil {
			t.Fatalf("user %s missing", u.Name)
		}
		if g.Password != "pw-"+u.Name || !slices.Equal(g.Permissions.Publish.Allow, u.Publish) ||
			!slices.Equal(g.Permissions.Subscribe.Allow, u.Subscribe) || (g.Permissions.Response != nil) != u.Responses {
			t.Errorf("user %s: nats-server read %+v", u.Name, g.Permissions)
		}
	}
	if len(got) != len(natsauth.Users()) {
		t.Errorf("nats.conf has %d users, want %d", len(got), len(natsauth.Users()))
	}
}
