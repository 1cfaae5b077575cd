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
	"github.com/nats-io/nuid"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/natsauth"
	"github.com/alicia-voice/alicia/pkg/natsserver"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

var update = flag.Bool("update", false, "rewrite deploy/nats.conf's authorization block and deploy/helm/alicia/examples/nats-auth-values.yaml")

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
	nc, js, err := bus.Connect(context.Background(), url, user, bus.DefaultStreams(),
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
	}{{pnc, rpc.AppliedSubject}, {pnc, rpc.HistorySubject}, {mnc, rpc.MemorySearchSubject}, {mnc, rpc.MemoryActionSubject},
		{mnc, rpc.MemoryPrefetchedSubject("am_1")}} {
		if _, err := s.nc.Subscribe(s.subject, func(m *nats.Msg) { _ = m.Respond([]byte("ok")) }); err != nil {
			t.Fatal(err)
		}
		if err := s.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for user, asks := range map[string][]string{
		natsauth.Gateway: {rpc.AppliedSubject, rpc.MemorySearchSubject, rpc.MemoryActionSubject},
		natsauth.LLM:     {rpc.HistorySubject, rpc.AppliedSubject, rpc.MemorySearchSubject, rpc.MemoryPrefetchedSubject("am_1")},
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

// TestCoreSubscriptions: the memory service hears on core NATS the
// clients' UserMessages (it starts their memory search when they are
// published) and every MemoryAction persistence may apply (which ends the
// prefetched searches of its user); a service without the grant is refused
// the user's words.
func TestCoreSubscriptions(t *testing.T) {
	url := startServer(t)
	ctx := context.Background()
	_, gjs := connect(t, url, natsauth.Gateway, violations{make(chan error, 1)})
	mnc, mjs := connect(t, url, natsauth.Memory, violations{make(chan error, 1)})
	heard := make(chan string, 8)
	for _, s := range []string{subjects.AllOfType(subjects.OriginClient, protocol.TypeUserMessage), subjects.System(protocol.TypeMemoryAction),
		subjects.AllOfType(subjects.OriginClient, protocol.TypeMemoryAction), subjects.AllOfType(subjects.OriginServer, protocol.TypeMemoryAction),
		subjects.AllOfType(subjects.OriginAgent, protocol.TypeMemoryAction)} {
		if _, err := mnc.Subscribe(s, func(m *nats.Msg) { heard <- m.Subject }); err != nil {
			t.Fatal(err)
		}
	}
	if err := mnc.Flush(); err != nil {
		t.Fatal(err)
	}
	cid := "ac_core"
	action := protocol.New(cid, &protocol.MemoryAction{ID: "amact_1", Action: protocol.MemoryActionActionDelete, Timestamp: 1})
	action.StanzaID = 2
	pub := bus.NewPublisher(gjs)
	if _, err := pub.PublishClient(ctx, userMessage(cid)); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.PublishClient(ctx, action); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewPublisher(mjs).PublishSystem(ctx, protocol.Envelope{Type: protocol.TypeMemoryAction, Body: action.Body}, "amact_1"); err != nil {
		t.Fatal(err)
	}
	want := []string{subjects.Client(cid, protocol.TypeUserMessage), subjects.Client(cid, protocol.TypeMemoryAction), subjects.System(protocol.TypeMemoryAction)}
	for _, w := range want {
		select {
		case got := <-heard:
			if got != w {
				t.Fatalf("heard %s, want %s", got, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("memory did not hear %s", w)
		}
	}
	for _, user := range []string{natsauth.TTS, natsauth.Persistence} {
		v := violations{make(chan error, 1)}
		nc, _ := connect(t, url, user, v)
		if _, err := nc.Subscribe(subjects.AllOfType(subjects.OriginClient, protocol.TypeUserMessage), func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		select {
		case err := <-v.ch:
			if !strings.Contains(err.Error(), "user_message") {
				t.Errorf("%s: violation %v does not name the subject", user, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: subscribing to the clients' UserMessages not denied", user)
		}
	}
}

// TestDeployConf: deploy/nats.conf, and deploy/nats/cluster.conf of the
// three-node cluster, hold the table's authorization block, and nats-server
// reads from them the same users and permissions.
func TestDeployConf(t *testing.T) {
	for _, name := range []string{"nats.conf", filepath.Join("nats", "cluster.conf")} {
		t.Run(name, func(t *testing.T) { checkDeployConf(t, filepath.Join("..", "..", "deploy", name)) })
	}
}

func checkDeployConf(t *testing.T, path string) {
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
		t.Fatalf("%s does not end with natsauth.Conf(): run go test ./pkg/natsauth -run TestDeployConf -update", path)
	}
	for _, u := range natsauth.Users() {
		t.Setenv(natsauth.PasswordVar(u.Name), "pw-"+u.Name)
	}
	t.Setenv("HOSTNAME", "nats-1") // deploy/nats/cluster.conf's server name
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) == "cluster.conf" && (opts.ServerName != "nats-1" || opts.Cluster.Name != "alicia" || len(opts.Routes) != 3 || !opts.JetStream) {
		t.Errorf("%s: server %q, cluster %q with %d routes, JetStream %v: want nats-1, alicia, 3 routes, JetStream", path, opts.ServerName, opts.Cluster.Name, len(opts.Routes), opts.JetStream)
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
			!slices.Equal(g.Permissions.Subscribe.Allow, u.Subscribe) ||
			!slices.Equal(g.Permissions.Publish.Deny, u.PublishDeny) || !slices.Equal(g.Permissions.Subscribe.Deny, u.SubscribeDeny) || (g.Permissions.Response != nil) != u.Responses {
			t.Errorf("user %s: nats-server read %+v", u.Name, g.Permissions)
		}
	}
	if len(got) != len(natsauth.Users()) {
		t.Errorf("nats.conf has %d users, want %d", len(got), len(natsauth.Users()))
	}
}

// denied runs create and reports whether the server refused it with a
// permissions violation (create then fails: its request has no answer).
func denied(t *testing.T, v violations, create func(context.Context) error) bool {
	t.Helper()
	for len(v.ch) > 0 {
		<-v.ch
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- create(ctx) }()
	select {
	case err := <-errc:
		return err != nil && errors.Is(err, nats.ErrPermissionViolation)
	case <-v.ch:
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("violation reported, yet the consumer was created")
		}
		return true
	}
}

// consumerCase is one consumer a service creates (or must not).
type consumerCase struct {
	name   string
	stream string
	create func(ctx context.Context, js jetstream.JetStream) error
}

func ordered(stream string, filters ...string) func(context.Context, jetstream.JetStream) error {
	return func(ctx context.Context, js jetstream.JetStream) error {
		c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: filters})
		if err != nil {
			return err
		}
		_, err = c.Info(ctx)
		return err
	}
}

// fetchAndDelete creates a consumer the way the gateway reads a timeline
// page (named, headers only, no acks), pulls from it without waiting and
// deletes it.
func fetchAndDelete(stream, filter string) func(context.Context, jetstream.JetStream) error {
	return func(ctx context.Context, js jetstream.JetStream) error {
		name := "tl_" + nuid.Next()
		c, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Name: name, FilterSubject: filter, HeadersOnly: true,
			DeliverPolicy: jetstream.DeliverLastPolicy, AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, InactiveThreshold: time.Minute})
		if err != nil {
			return err
		}
		b, err := c.FetchNoWait(1)
		if err != nil {
			return err
		}
		for range b.Messages() {
		}
		if err := b.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return err
		}
		return js.DeleteConsumer(ctx, stream, name)
	}
}

func durable(stream, name string, filters ...string) func(context.Context, jetstream.JetStream) error {
	return func(ctx context.Context, js jetstream.JetStream) error {
		cfg := jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy}
		if len(filters) == 1 {
			cfg.FilterSubject = filters[0]
		} else {
			cfg.FilterSubjects = filters
		}
		_, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
		return err
	}
}

// TestOnlyPersistenceConsumesEverything: on CONVERSATIONS and SYSTEM, a
// service other than persistence may create only consumers with the one
// filter it uses; creating one with a broader filter, several filters or
// none is a permissions violation. Each service can create the consumers
// it uses (same filters as in the services); persistence any.
func TestOnlyPersistenceConsumesEverything(t *testing.T) {
	url := startServer(t)
	_, ajs := connect(t, url, natsauth.Admin, violations{make(chan error, 1)})
	if _, err := ajs.CreateStream(context.Background(), jetstream.StreamConfig{Name: "LLM_TURNS", Subjects: []string{subjects.TurnPartition(0)}}); err != nil {
		t.Fatal(err)
	}
	cid := "ac_c1"
	uses := map[string][]consumerCase{
		natsauth.Gateway: {
			{"forward", bus.StreamConversations, ordered(bus.StreamConversations, subjects.ServerAll(cid))},
			{"timeline stream", bus.StreamConversations, ordered(bus.StreamConversations, subjects.Conversation(cid))},
			{"timeline page", bus.StreamConversations, fetchAndDelete(bus.StreamConversations, subjects.Conversation(cid))},
		},
		natsauth.RoomAgent: {{"forward", bus.StreamConversations, ordered(bus.StreamConversations, subjects.ServerAll(cid))}, {"dispatch", bus.StreamDispatch, durable(bus.StreamDispatch, "room-agent")}},
		natsauth.TTS: {
			{"answers", bus.StreamConversations, durable(bus.StreamConversations, "tts", subjects.AllOfType(subjects.OriginServer, protocol.TypeStartAnswer))},
			{"a turn's sentences", bus.StreamConversations, ordered(bus.StreamConversations, subjects.Server(cid, protocol.TypeAssistantSentence))},
			{"a turn's stops", bus.StreamConversations, ordered(bus.StreamConversations, subjects.Client(cid, protocol.TypeControlStop))},
		},
		natsauth.Memory: {
			{"actions", bus.StreamConversations, durable(bus.StreamConversations, "memory", subjects.AllOfType(subjects.OriginClient, protocol.TypeMemoryAction))},
			{"extraction", bus.StreamConversations, durable(bus.StreamConversations, "memory-extraction", subjects.ServerAll("*"))},
		},
		natsauth.LLM: {
			{"turns", "LLM_TURNS", durable("LLM_TURNS", "llm-0", subjects.TurnPartition(0))},
			{"tool settings", bus.StreamSystem, ordered(bus.StreamSystem, subjects.System(protocol.TypeToolSetting))},
			{"mcp configs", bus.StreamSystem, ordered(bus.StreamSystem, subjects.System(protocol.TypeMCPServerConfig))},
		},
		natsauth.ASR: {{"jobs", bus.StreamASRJobs, durable(bus.StreamASRJobs, "asr")}},
		natsauth.Persistence: {
			{"conversations", bus.StreamConversations, durable(bus.StreamConversations, natsauth.PersistenceConsumer)},
			{"system", bus.StreamSystem, durable(bus.StreamSystem, natsauth.PersistenceConsumer)},
			{"everything", bus.StreamConversations, ordered(bus.StreamConversations, subjects.AllConversations)},
		},
	}
	broad := []consumerCase{
		{"all conversations", bus.StreamConversations, ordered(bus.StreamConversations, subjects.AllConversations)},
		{"one conversation", bus.StreamConversations, ordered(bus.StreamConversations, subjects.Conversation(cid))},
		{"client envelopes", bus.StreamConversations, durable(bus.StreamConversations, "x", "alicia.conv.*.client.>")},
		{"no filter", bus.StreamConversations, durable(bus.StreamConversations, "x")},
		{"several filters", bus.StreamConversations, ordered(bus.StreamConversations, subjects.ServerAll(cid), subjects.Conversation(cid))},
		{"system", bus.StreamSystem, ordered(bus.StreamSystem, subjects.AllSystem)},
		{"persistence's durable", bus.StreamConversations, durable(bus.StreamConversations, natsauth.PersistenceConsumer, subjects.ServerAll("*"))},
	}
	// The gateway reads one conversation's envelopes of every origin (the
	// timeline): its filter alicia.conv.*.> admits these too.
	wider := map[string][]string{natsauth.Gateway: {"one conversation", "client envelopes"}}
	for _, user := range natsauth.Services() {
		t.Run(user, func(t *testing.T) {
			v := violations{make(chan error, 1)}
			_, js := connect(t, url, user, v)
			for _, c := range uses[user] {
				if denied(t, v, func(ctx context.Context) error { return c.create(ctx, js) }) {
					t.Errorf("%s: consumer %q on %s denied", user, c.name, c.stream)
				}
			}
			if user == natsauth.Persistence {
				return
			}
			for _, c := range broad {
				if slices.Contains(wider[user], c.name) {
					continue
				}
				if !denied(t, v, func(ctx context.Context) error { return c.create(ctx, js) }) {
					t.Errorf("%s: consumer %q on %s not denied", user, c.name, c.stream)
				}
			}
		})
	}
}

// quiet runs op and, when it returns no error, gives the server a second
// to report a violation (denied then cancels ctx): for operations the
// server refuses without an answer.
func quiet(op func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := op(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
			return nil
		}
	}
}

// pull asks the consumer for one message without waiting (a 404 when it
// has none is an answer).
func pull(nc *nats.Conn, stream, consumer string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := nc.RequestWithContext(ctx, "$JS.API.CONSUMER.MSG.NEXT."+stream+"."+consumer, []byte(`{"batch":1,"no_wait":true}`))
		return err
	}
}

// lastOf reads the last message on subject (ErrMsgNotFound is an answer).
func lastOf(js jetstream.JetStream, stream, subject string) func(context.Context) error {
	return func(ctx context.Context) error {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		if _, err := st.GetLastMsgForSubject(ctx, subject); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return err
		}
		return nil
	}
}

// replay reads filter's messages by sequence (bus.Replay) and reports how
// many it read through n.
func replay(nc *nats.Conn, filter string, n *int) func(context.Context) error {
	return func(ctx context.Context) error {
		*n = 0
		return bus.Replay(ctx, nc, bus.StreamConversations, filter, 1, func(bus.Stored) error { *n++; return nil })
	}
}

// TestOnlyOwnersUseTheirDurables: no service but persistence can pull
// from, acknowledge, read, delete or take over persistence's durable
// consumers, or a durable of another service; each can use its own. Direct
// gets: each service reads the last message on the subjects it looks up;
// by sequence (any message, e.g. a user's message) only the llm can, for
// bus.Replay when it resumes a turn; the others are refused.
func TestOnlyOwnersUseTheirDurables(t *testing.T) {
	url := startServer(t)
	ctx := context.Background()
	_, pjs := connect(t, url, natsauth.Persistence, violations{make(chan error, 1)})
	for _, s := range []string{bus.StreamConversations, bus.StreamSystem} {
		if _, err := pjs.CreateOrUpdateConsumer(ctx, s, jetstream.ConsumerConfig{Durable: natsauth.PersistenceConsumer, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	_, gjs := connect(t, url, natsauth.Gateway, violations{make(chan error, 1)})
	cid := "ac_d1"
	if _, err := bus.NewPublisher(gjs).PublishClient(ctx, userMessage(cid)); err != nil {
		t.Fatal(err)
	}
	type durableCase struct{ stream, name, filter string }
	own := map[string][]durableCase{
		natsauth.TTS:       {{bus.StreamConversations, "tts", subjects.AllOfType(subjects.OriginServer, protocol.TypeStartAnswer)}},
		natsauth.Memory:    {{bus.StreamConversations, "memory", subjects.AllOfType(subjects.OriginClient, protocol.TypeMemoryAction)}, {bus.StreamConversations, "memory-extraction", subjects.ServerAll("*")}},
		natsauth.ASR:       {{bus.StreamASRJobs, "asr", ""}},
		natsauth.RoomAgent: {{bus.StreamDispatch, "room-agent", ""}},
	}
	type lookupCase struct{ stream, subject string }
	lookups := map[string][]lookupCase{
		natsauth.ASR: {{bus.StreamConversations, subjects.Server(cid, protocol.TypeTranscription)},
			{bus.StreamConversations, subjects.Client(cid, protocol.TypeUserMessage)}, {bus.StreamASRJobs, subjects.ASRJob(cid)}},
		natsauth.TTS: {{bus.StreamConversations, subjects.Server(cid, protocol.TypeStartAnswer)},
			{bus.StreamConversations, subjects.Agent(cid, protocol.TypeSentenceAudio)},
			{bus.StreamConversations, subjects.Client(cid, protocol.TypeControlStop)}},
		natsauth.LLM: {{bus.StreamConversations, subjects.Client(cid, protocol.TypeConfiguration)},
			{bus.StreamConversations, subjects.Client(cid, protocol.TypeControlStop)},
			{bus.StreamConversations, subjects.Server(cid, protocol.TypeStartAnswer)},
			{bus.StreamConversations, subjects.ServerAll(cid)}},
	}
	bySequence := []string{natsauth.LLM}
	for _, user := range natsauth.Services() {
		if user == natsauth.Persistence {
			continue
		}
		t.Run(user, func(t *testing.T) {
			v := violations{make(chan error, 1)}
			nc, js := connect(t, url, user, v)
			for _, d := range own[user] {
				cfg := jetstream.ConsumerConfig{Durable: d.name, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: d.filter}
				if denied(t, v, func(ctx context.Context) error { _, err := js.CreateOrUpdateConsumer(ctx, d.stream, cfg); return err }) {
					t.Errorf("creating its durable %s/%s denied", d.stream, d.name)
				}
				if denied(t, v, pull(nc, d.stream, d.name)) {
					t.Errorf("pulling from its durable %s/%s denied", d.stream, d.name)
				}
			}
			for _, l := range lookups[user] {
				if denied(t, v, lastOf(js, l.stream, l.subject)) {
					t.Errorf("last message on %s denied", l.subject)
				}
			}
			if user != natsauth.ASR && !denied(t, v, lastOf(js, bus.StreamConversations, subjects.Client(cid, protocol.TypeUserMessage))) {
				t.Errorf("last user message of a conversation not denied")
			}
			var n int
			if slices.Contains(bySequence, user) {
				if denied(t, v, replay(nc, subjects.Conversation(cid), &n)) || n != 1 {
					t.Errorf("replay by sequence denied (read %d)", n)
				}
			} else if !denied(t, v, replay(nc, subjects.Client(cid, protocol.TypeUserMessage), &n)) {
				t.Errorf("a user's message read by sequence (%d read)", n)
			}
			for _, s := range []string{bus.StreamConversations, bus.StreamSystem} {
				name := natsauth.PersistenceConsumer
				for what, op := range map[string]func(context.Context) error{
					"pull from": pull(nc, s, name),
					"read":      func(ctx context.Context) error { _, err := js.Consumer(ctx, s, name); return err },
					"delete":    func(ctx context.Context) error { return js.DeleteConsumer(ctx, s, name) },
					"ack on": quiet(func(context.Context) error {
						if err := nc.Publish("$JS.ACK."+s+"."+name+".1.1.1.0.0", nil); err != nil {
							return err
						}
						return nc.Flush()
					}),
				} {
					if !denied(t, v, op) {
						t.Errorf("%s: could %s persistence's durable", s, what)
					}
				}
			}
			for owner, ds := range own {
				for _, d := range ds {
					if owner != user && !denied(t, v, pull(nc, d.stream, d.name)) {
						t.Errorf("pulling from %s's durable %s/%s not denied", owner, d.stream, d.name)
					}
				}
			}
		})
	}
	// Nothing was taken from persistence.
	cons, err := pjs.Consumer(ctx, bus.StreamConversations, natsauth.PersistenceConsumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 1 || info.NumAckPending != 0 || info.Delivered.Stream != 0 {
		t.Fatalf("persistence's durable: %d pending, %d delivered unacknowledged, delivered up to %d; want the message untouched",
			info.NumPending, info.NumAckPending, info.Delivered.Stream)
	}
}

// TestSessionsBucket: the gateway creates its sessions bucket and puts,
// gets and deletes entries without a violation; every other service is
// refused reading it (the bucket, a key's direct get, the stream's message
// get, a watch's consumer, its subjects on core NATS) and writing it.
func TestSessionsBucket(t *testing.T) {
	url := startServer(t)
	ctx := context.Background()
	gv := violations{make(chan error, 1)}
	_, gjs := connect(t, url, natsauth.Gateway, gv)
	cfg := jetstream.KeyValueConfig{Bucket: natsauth.SessionsBucket, History: 1, TTL: time.Hour, Storage: jetstream.FileStorage, MaxBytes: 1 << 20}
	kv, err := gjs.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k1", []byte("alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "k2", []byte("bob")); err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "k1"); err != nil || string(e.Value()) != "alice" {
		t.Fatalf("get: %v", err)
	}
	if err := kv.Delete(ctx, "k2"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "k2"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	// Another replica, or a restart: the bucket is updated and looked up.
	cfg.TTL = 2 * time.Hour
	if _, err := gjs.CreateOrUpdateKeyValue(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := gjs.KeyValue(ctx, natsauth.SessionsBucket); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-gv.ch:
		t.Fatalf("gateway: %v", err)
	default:
	}

	stream, subject := "KV_"+natsauth.SessionsBucket, "$KV."+natsauth.SessionsBucket+".k1"
	for _, user := range natsauth.Services() {
		if user == natsauth.Gateway {
			continue
		}
		t.Run(user, func(t *testing.T) {
			v := violations{make(chan error, 1)}
			nc, js := connect(t, url, user, v)
			request := func(subj, body string) func(context.Context) error {
				return func(ctx context.Context) error {
					_, err := nc.RequestWithContext(ctx, subj, []byte(body))
					return err
				}
			}
			for what, op := range map[string]func(context.Context) error{
				"open the bucket":   func(ctx context.Context) error { _, err := js.KeyValue(ctx, natsauth.SessionsBucket); return err },
				"update the bucket": func(ctx context.Context) error { _, err := js.CreateOrUpdateKeyValue(ctx, cfg); return err },
				"direct get":        request("$JS.API.DIRECT.GET."+stream+"."+subject, ""),
				"direct get by seq": request("$JS.API.DIRECT.GET."+stream, `{"seq":1}`),
				"message get":       request("$JS.API.STREAM.MSG.GET."+stream, `{"last_by_subj":"`+subject+`"}`),
				"watch": func(ctx context.Context) error {
					return ordered(stream, "$KV."+natsauth.SessionsBucket+".>")(ctx, js)
				},
				"subscribe": quiet(func(context.Context) error {
					if _, err := nc.SubscribeSync("$KV." + natsauth.SessionsBucket + ".>"); err != nil {
						return err
					}
					return nc.Flush()
				}),
				"put": quiet(func(context.Context) error {
					if err := nc.Publish(subject, []byte("mallory")); err != nil {
						return err
					}
					return nc.Flush()
				}),
			} {
				if !denied(t, v, op) {
					t.Errorf("could %s", what)
				}
			}
		})
	}
	if e, err := kv.Get(ctx, "k1"); err != nil || string(e.Value()) != "alice" {
		t.Fatalf("the gateway's entry after the others tried: %v", err)
	}
}

// TestLLMSourceWatch: the llm hears the leader elections of CONVERSATIONS
// and LLM_TURNS and may ask LLM_TURNS's leader, and no other stream's, to
// step down (services/llm/internal/queue.SourceWatch); no other service may.
func TestLLMSourceWatch(t *testing.T) {
	url := startServer(t)
	anc, _ := connect(t, url, natsauth.Admin, violations{make(chan error, 1)})
	v := violations{make(chan error, 1)}
	lnc, _ := connect(t, url, natsauth.LLM, v)
	for _, stream := range []string{bus.StreamConversations, "LLM_TURNS"} {
		subject := "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + stream
		sub, err := lnc.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		if err := lnc.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := anc.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if _, err := sub.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("llm did not hear %s: %v", subject, err)
		}
	}
	stepDown := func(nc *nats.Conn, stream string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil)
			return err
		}
	}
	// A single server answers that it is not clustered: the request passed.
	if denied(t, v, stepDown(lnc, "LLM_TURNS")) {
		t.Error("llm: LLM_TURNS step-down denied")
	}
	for _, stream := range bus.StreamNames() {
		if !denied(t, v, stepDown(lnc, stream)) {
			t.Errorf("llm: %s step-down not denied", stream)
		}
	}
	// A replica giving a turn partition up unpins its consumer.
	unpin := func(nc *nats.Conn, stream string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := nc.RequestWithContext(ctx, "$JS.API.CONSUMER.UNPIN."+stream+".llm-p0", []byte(`{"group":"llm"}`))
			return err
		}
	}
	if denied(t, v, unpin(lnc, "LLM_TURNS")) {
		t.Error("llm: unpinning an LLM_TURNS consumer denied")
	}
	if !denied(t, v, unpin(lnc, bus.StreamConversations)) {
		t.Error("llm: unpinning a CONVERSATIONS consumer not denied")
	}
	for _, user := range natsauth.Services() {
		if user == natsauth.LLM {
			continue
		}
		t.Run(user, func(t *testing.T) {
			v := violations{make(chan error, 1)}
			nc, _ := connect(t, url, user, v)
			if !denied(t, v, stepDown(nc, "LLM_TURNS")) {
				t.Errorf("%s: LLM_TURNS step-down not denied", user)
			}
			if !denied(t, v, unpin(nc, "LLM_TURNS")) {
				t.Errorf("%s: unpinning an LLM_TURNS consumer not denied", user)
			}
		})
	}
}

// TestGatewayRevocations: the gateway replicas tell each other what was
// revoked on subjects.GatewayRevocations (core NATS); no other service may
// hear or forge it.
func TestGatewayRevocations(t *testing.T) {
	url := startServer(t)
	g1, _ := connect(t, url, natsauth.Gateway, violations{make(chan error, 1)})
	g2, _ := connect(t, url, natsauth.Gateway, violations{make(chan error, 1)})
	heard := make(chan string, 4)
	if _, err := g2.Subscribe(subjects.GatewayRevocations, func(m *nats.Msg) { heard <- string(m.Data) }); err != nil {
		t.Fatal(err)
	}
	if err := g2.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := g1.Publish(subjects.GatewayRevocations, []byte("from the gateway")); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-heard:
		if got != "from the gateway" {
			t.Fatalf("heard %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the other gateway did not hear the revocation")
	}
	for _, user := range []string{natsauth.RoomAgent, natsauth.ASR, natsauth.LLM, natsauth.TTS, natsauth.Memory, natsauth.Persistence} {
		v := violations{make(chan error, 2)}
		nc, _ := connect(t, url, user, v)
		if err := nc.Publish(subjects.GatewayRevocations, []byte("forged by "+user)); err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Subscribe(subjects.GatewayRevocations, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		for range 2 {
			select {
			case <-v.ch:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: publishing or subscribing to %s raised no permissions violation", user, subjects.GatewayRevocations)
			}
		}
	}
	if err := g1.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-heard:
		t.Fatalf("a revocation from another service reached the gateway: %q", got)
	default:
	}
}
