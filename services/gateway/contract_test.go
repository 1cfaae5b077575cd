package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/restapi"
	"github.com/alicia-voice/alicia/services/gateway"
)

// contractFile is the REST API's contract, the source of pkg/restapi,
// web/src/rest.gen.ts and API.md's reference.
const contractFile = "../../proto-schemas/rest/openapi.json"

// contract is the OpenAPI document, and the operations a test drove.
type contract struct {
	doc    *openapi3.T
	router routers.Router
	mu     sync.Mutex
	driven map[string]bool // "METHOD /path/{template}"
}

func loadContract(t *testing.T) *contract {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(contractFile)
	if err != nil {
		t.Fatalf("load %s: %v", contractFile, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", contractFile, err)
	}
	// The document's server is "/"; the router matches paths on any host.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &contract{doc: doc, router: router, driven: map[string]bool{}}
}

// operations are the document's "METHOD /path" pairs.
func (c *contract) operations() []string {
	var ops []string
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	sort.Strings(ops)
	return ops
}

// request is one call of a contract test.
type request struct {
	key, cookie, origin string
	method, path        string
	body                any
	// invalid: the request breaks the contract on purpose (a 400 test);
	// only its answer is checked.
	invalid bool
}

// call sends r to s, fails the test unless the answer's status is want,
// and checks the request (unless invalid) and the answer against the
// contract: the route is documented, the status is one of its answers,
// and the headers and body match their schemas.
func (c *contract) call(t *testing.T, s *stack, r request, want int) reply {
	t.Helper()
	var raw []byte
	if r.body != nil {
		var err error
		if raw, err = json.Marshal(r.body); err != nil {
			t.Fatal(err)
		}
	}
	newReq := func() *http.Request {
		req, err := http.NewRequest(r.method, s.base+r.path, bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if r.body == nil {
			req.Body, req.ContentLength = http.NoBody, 0
		} else {
			req.Header.Set("Content-Type", "application/json")
		}
		if r.key != "" {
			req.Header.Set("Authorization", "Bearer "+r.key)
		}
		if r.cookie != "" {
			req.Header.Set("Cookie", "alicia_session="+r.cookie)
		}
		if r.origin != "" {
			req.Header.Set("Origin", r.origin)
		}
		return req
	}
	rep := send(t, newReq(), r.method, r.path)
	if rep.status != want {
		t.Fatalf("%s %s = %d %s, want %d", r.method, r.path, rep.status, rep.body, want)
	}
	req := newReq()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s is not in %s: %v", r.method, r.path, contractFile, err)
	}
	c.mu.Lock()
	c.driven[route.Method+" "+route.Path] = true
	c.mu.Unlock()
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if !r.invalid {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s %s: the request breaks the contract: %v", r.method, r.path, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rep.status, Header: rep.header,
		Body: io.NopCloser(bytes.NewReader(rep.body)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s = %d %s: the answer breaks the contract: %v", r.method, r.path, rep.status, rep.body, err)
	}
	return rep
}

var echoParam = regexp.MustCompile(`:([A-Za-z_]+)`)

// TestRoutesMatchTheContract: every /v1 route the gateway registers is in
// the OpenAPI document, and every route the document describes is
// registered, by method and path.
func TestRoutesMatchTheContract(t *testing.T) {
	c := loadContract(t)
	got := make(chan []*echo.Route, 1)
	newStack(t, func(o *stackOptions) {
		o.noPersistence = true
		o.runContext = func(ctx context.Context) context.Context {
			return gateway.WithRoutes(ctx, func(r []*echo.Route) { got <- r })
		}
	})
	var registered []string
	for _, r := range <-got {
		if !strings.HasPrefix(r.Path, "/v1/") || !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}, r.Method) {
			continue // the web client, the probes, echo's not-found handlers of the group
		}
		op := r.Method + " " + echoParam.ReplaceAllString(r.Path, "{$1}")
		if !slices.Contains(registered, op) {
			registered = append(registered, op)
		}
	}
	sort.Strings(registered)
	documented := c.operations()
	for _, op := range registered {
		if !slices.Contains(documented, op) {
			t.Errorf("%s is served but not in %s", op, contractFile)
		}
	}
	for _, op := range documented {
		if !slices.Contains(registered, op) {
			t.Errorf("%s is in %s but not served", op, contractFile)
		}
	}
	if len(registered) < 30 {
		t.Fatalf("only %d /v1 routes registered: %v", len(registered), registered)
	}
}

// TestAnswersMatchTheContract drives every documented route but the two
// streams (the WebSocket, the timeline's server-sent events: their bodies
// are not JSON) on a gateway with NATS, Postgres, persistence and memory,
// and checks each request and answer against the document: status, headers,
// bodies, errors included. The answers also decode into the generated
// types.
func TestAnswersMatchTheContract(t *testing.T) {
	c := loadContract(t)
	s := newStack(t, func(o *stackOptions) {
		o.memory = true
		o.gateway = func(cfg *gateway.Config) { cfg.MCPAllowedHosts = []string{"127.0.0.1"} }
	})
	call := func(r request, want int, v any) {
		t.Helper()
		rep := c.call(t, s, r, want)
		if v != nil {
			dec := json.NewDecoder(bytes.NewReader(rep.body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("%s %s: %s does not decode into %T: %v", r.method, r.path, rep.body, v, err)
			}
		}
	}
	alice := func(method, path string, body any) request {
		return request{key: aliceKey, method: method, path: path, body: body}
	}
	admin := func(method, path string, body any) request {
		return request{key: adminKey, method: method, path: path, body: body}
	}

	// Sessions: a browser's sign-in, its session, its sign-out.
	var sess restapi.Session
	rep := c.call(t, s, request{origin: s.base, method: "POST", path: "/v1/session", body: restapi.SessionRequest{APIKey: aliceKey}}, http.StatusCreated)
	if err := json.Unmarshal(rep.body, &sess); err != nil || sess.User != "alice" {
		t.Fatalf("session %s: %v", rep.body, err)
	}
	cookie := sessionCookie(t, rep)
	call(request{cookie: cookie.Value, method: "GET", path: "/v1/session"}, http.StatusOK, &sess)
	call(request{cookie: cookie.Value, origin: s.base, method: "DELETE", path: "/v1/session"}, http.StatusNoContent, nil)
	call(request{cookie: cookie.Value, method: "GET", path: "/v1/session"}, http.StatusUnauthorized, nil)
	call(request{method: "GET", path: "/v1/conversations"}, http.StatusUnauthorized, nil)

	// Conversations, their messages and branches.
	var conv restapi.Conversation
	call(alice("POST", "/v1/conversations", restapi.ConversationCreate{Title: protocol.Ptr("contract")}), http.StatusCreated, &conv)
	cid := conv.ID
	ans := s.turn(t, "alice", cid, "um_contract", "", "2+2?")
	var page restapi.ConversationPage
	call(alice("GET", "/v1/conversations?status=all&limit=10&q=contr", nil), http.StatusOK, &page)
	if len(page.Conversations) != 1 {
		t.Fatalf("conversations %+v", page)
	}
	call(request{key: aliceKey, method: "GET", path: "/v1/conversations?limit=0", invalid: true}, http.StatusBadRequest, nil)
	var detail restapi.ConversationWithMessages
	call(alice("GET", "/v1/conversations/"+cid, nil), http.StatusOK, &detail)
	if len(detail.Messages) != 2 || len(detail.Messages[1].ToolUses) != 1 || len(detail.Messages[1].Reasoning) != 1 {
		t.Fatalf("messages %+v", detail.Messages)
	}
	call(alice("GET", "/v1/conversations/"+cid+"?through="+ans, nil), http.StatusOK, &detail)
	call(alice("GET", "/v1/conversations/ac_unknown", nil), http.StatusNotFound, nil)
	call(request{key: bobKey, method: "GET", path: "/v1/conversations/" + cid}, http.StatusForbidden, nil)
	call(alice("PATCH", "/v1/conversations/"+cid, restapi.ConversationPatch{Title: protocol.Ptr("renamed")}), http.StatusOK, &conv)
	var sibs restapi.Siblings
	call(alice("GET", "/v1/messages/"+ans+"/siblings", nil), http.StatusOK, &sibs)
	if sibs.ParentID == nil || len(sibs.Siblings) != 1 {
		t.Fatalf("siblings %+v", sibs)
	}

	// Votes and notes.
	var votes restapi.VoteResult
	call(alice("POST", "/v1/messages/"+ans+"/votes", restapi.VoteRequest{Vote: "up"}), http.StatusOK, &votes)
	if votes.Upvotes != 1 || votes.UserVote == nil || *votes.UserVote != "up" {
		t.Fatalf("votes %+v", votes)
	}
	call(alice("POST", "/v1/messages/"+ans+"/votes", restapi.VoteRequest{Vote: "up", TargetType: "tool_use", TargetID: detail.Messages[1].ToolUses[0].ID}), http.StatusOK, &votes)
	var note restapi.Note
	call(alice("POST", "/v1/messages/"+ans+"/notes", restapi.NoteCreate{Content: "check this"}), http.StatusCreated, &note)
	var notes restapi.NoteList
	call(alice("GET", "/v1/messages/"+ans+"/notes", nil), http.StatusOK, &notes)
	call(alice("DELETE", "/v1/notes/"+note.ID, nil), http.StatusNoContent, nil)

	// The timeline, and voice (no LiveKit here: 503; a GET: 405).
	var tl restapi.TimelinePage
	call(alice("GET", "/v1/conversations/"+cid+"/timeline?after=0&limit=100", nil), http.StatusOK, &tl)
	if len(tl.Steps) == 0 || !tl.Steps[0].Time.Before(tl.Steps[len(tl.Steps)-1].Time.Add(1)) {
		t.Fatalf("timeline %+v", tl)
	}
	call(alice("POST", "/v1/conversations/"+cid+"/token", nil), http.StatusServiceUnavailable, nil)
	call(alice("GET", "/v1/conversations/"+cid+"/token", nil), http.StatusMethodNotAllowed, nil)

	// Memories.
	var mem restapi.Memory
	call(alice("POST", "/v1/memories", restapi.MemoryInput{Content: protocol.Ptr("likes tea"), Tags: []string{"drink"}}), http.StatusCreated, &mem)
	call(alice("PATCH", "/v1/memories/"+mem.ID, restapi.MemoryInput{Importance: protocol.Ptr(0.9)}), http.StatusOK, &mem)
	call(alice("POST", "/v1/memories/"+mem.ID+"/pin", nil), http.StatusOK, &mem)
	call(alice("PUT", "/v1/memories/"+mem.ID+"/rating", restapi.MemoryRating{Rating: 4}), http.StatusOK, &mem)
	if mem.UserRating == nil || *mem.UserRating != 4 {
		t.Fatalf("rated memory %+v", mem)
	}
	call(request{key: aliceKey, method: "PUT", path: "/v1/memories/" + mem.ID + "/rating", body: restapi.MemoryRating{Rating: 9}, invalid: true}, http.StatusBadRequest, nil)
	var mems restapi.MemoryPage
	call(alice("GET", "/v1/memories?limit=5", nil), http.StatusOK, &mems)
	if len(mems.Memories) != 1 || !mems.Memories[0].Pinned {
		t.Fatalf("memories %+v", mems)
	}
	call(alice("GET", "/v1/memories?q="+url.QueryEscape("tea"), nil), http.StatusServiceUnavailable, nil) // search is off
	var uses restapi.MemoryUsePage
	call(alice("GET", "/v1/memories/"+mem.ID+"/uses", nil), http.StatusOK, &uses)
	call(alice("POST", "/v1/memories/"+mem.ID+"/archive", nil), http.StatusOK, &mem)
	call(alice("DELETE", "/v1/memories/"+mem.ID, nil), http.StatusNoContent, nil)

	// Voices and languages: the person's defaults, the conversation's own.
	var settings restapi.UserSettings
	call(alice("GET", "/v1/settings", nil), http.StatusOK, &settings)
	call(alice("PUT", "/v1/settings", restapi.UserSettings{SpeechSpeed: protocol.Ptr(1.5), TimeZone: protocol.Ptr("Europe/Paris")}), http.StatusOK, &settings)
	call(alice("PUT", "/v1/settings", restapi.UserSettings{TimeZone: protocol.Ptr("Nowhere/Else")}), http.StatusBadRequest, nil)
	var eff restapi.EffectivePreferences
	call(alice("PUT", "/v1/conversations/"+cid+"/preferences", restapi.ConversationPreferences{Language: protocol.Ptr("fr")}), http.StatusOK, &eff)
	if eff.Language != "fr" || eff.SpeechSpeed != 1.5 || eff.TimeZone != "Europe/Paris" {
		t.Fatalf("preferences %+v", eff)
	}

	// Timers: one set by the llm's tool, listed and cancelled.
	zone, now := "UTC", time.Now()
	s.publish(t, "", protocol.New("", &protocol.Timer{ID: "atm_contract", UserID: "alice", ConversationID: cid, Kind: protocol.TimerKindTimer,
		DueAt: now.Add(time.Hour).UnixMilli(), TimeZone: &zone, Status: protocol.TimerStatusScheduled, CreatedAt: now.UnixMilli(), Timestamp: now.UnixMilli()}))
	var timers restapi.TimerList
	call(alice("GET", "/v1/timers", nil), http.StatusOK, &timers)
	if len(timers.Timers) != 1 || timers.Timers[0].ID != "atm_contract" {
		t.Fatalf("timers %+v", timers)
	}
	var timer restapi.Timer
	call(alice("DELETE", "/v1/timers/atm_contract", nil), http.StatusOK, &timer)
	call(alice("DELETE", "/v1/timers/atm_contract", nil), http.StatusConflict, nil)

	// Tools and MCP servers: a user sees less than an administrator.
	s.publish(t, "", protocol.New("", &protocol.ToolRegistration{Source: "builtin", Tools: []protocol.ToolRegistrationToolsElem{
		{Name: "calculator", Description: protocol.Ptr("Evaluates arithmetic"), Parameters: protocol.ToolRegistrationToolsElemParameters{"type": "object"}}}}))
	var tools restapi.ToolList
	call(alice("GET", "/v1/tools", nil), http.StatusOK, &tools)
	var tool restapi.Tool
	call(admin("PATCH", "/v1/tools/calculator", restapi.EnabledPatch{Enabled: protocol.Ptr(false)}), http.StatusOK, &tool)
	call(alice("PATCH", "/v1/tools/calculator", restapi.EnabledPatch{Enabled: protocol.Ptr(true)}), http.StatusForbidden, nil)
	var srv restapi.MCPServer
	call(admin("PUT", "/v1/mcp-servers/files", restapi.MCPServerPut{Transport: "http", URL: protocol.Ptr("http://127.0.0.1:9/mcp")}), http.StatusCreated, &srv)
	call(admin("PUT", "/v1/mcp-servers/files", restapi.MCPServerPut{Transport: "http", URL: protocol.Ptr("http://127.0.0.1:9/mcp"), Enabled: protocol.Ptr(false)}), http.StatusOK, &srv)
	call(admin("PATCH", "/v1/mcp-servers/files", restapi.EnabledPatch{Enabled: protocol.Ptr(true)}), http.StatusOK, &srv)
	var servers restapi.MCPServerList
	call(admin("GET", "/v1/mcp-servers", nil), http.StatusOK, &servers)
	if len(servers.Servers) != 1 || servers.Servers[0].URL == nil {
		t.Fatalf("servers (administrator) %+v", servers)
	}
	var public restapi.MCPServerList
	call(alice("GET", "/v1/mcp-servers", nil), http.StatusOK, &public)
	if len(public.Servers) != 1 || public.Servers[0].URL != nil {
		t.Fatalf("servers (user) %+v", public)
	}
	call(admin("DELETE", "/v1/mcp-servers/files", nil), http.StatusNoContent, nil)

	// Prompt versions: listed, promoted at a share, rolled back.
	s.publish(t, "", protocol.New("", &protocol.PromptVersion{ID: "pv_contract", Component: "system", Version: 1, Text: "Be brief.",
		UserID: protocol.Ptr("alice"), Status: protocol.PromptVersionStatusCandidate, CreatedBy: "run:contract", CreatedAt: 1}))
	var versions restapi.PromptVersionList
	call(alice("GET", "/v1/prompt-versions?component=system&scope=mine", nil), http.StatusOK, &versions)
	var version restapi.PromptVersion
	call(alice("POST", "/v1/prompt-versions/pv_contract/promote", restapi.PromptPromote{RolloutShare: protocol.Ptr(0.5)}), http.StatusOK, &version)
	var rolledBack restapi.PromptRolledBack
	call(alice("POST", "/v1/prompt-versions/rollback", restapi.PromptRollback{Component: "system"}), http.StatusOK, &rolledBack)
	call(alice("POST", "/v1/prompt-versions/rollback", restapi.PromptRollback{Component: "system", Scope: protocol.Ptr("installation")}), http.StatusForbidden, nil)

	// Prompt optimisation: weights, opt-in, a run reported by the
	// optimiser, its elite promoted; a second run cancelled.
	var prefs restapi.OptimizePreferences
	call(alice("GET", "/v1/optimize/preferences", nil), http.StatusOK, &prefs)
	call(alice("PUT", "/v1/optimize/preferences", restapi.OptimizePreferencesPut{Weights: restapi.DimensionWeights{"brevity": 1}}), http.StatusOK, &prefs)
	var sharing restapi.OptimizeSharing
	call(alice("GET", "/v1/optimize/sharing", nil), http.StatusOK, &sharing)
	call(alice("PUT", "/v1/optimize/sharing", restapi.OptimizeSharing{Share: true}), http.StatusOK, &sharing)
	var run restapi.OptimizationRun
	call(alice("POST", "/v1/optimize/runs", restapi.OptimizationRunCreate{Budget: 20}), http.StatusAccepted, &run)
	s.publish(t, "", protocol.New("", &protocol.EliteOptions{RunID: run.ID, Status: protocol.EliteOptionsStatusDone, Budget: 20, MetricCalls: 20,
		Iteration: 2, FrontSize: 1, BestScores: protocol.EliteOptionsBestScores{"relevancy": 1},
		Elites: []protocol.Elite{{CandidateID: "pc_contract", Components: protocol.EliteComponents{"system": "Be briefer."},
			Scores: protocol.EliteScores{"relevancy": 1}, Examples: []protocol.Example{{MessageID: "am_c", Question: "q", Current: "a", Candidate: "b"}}}}}))
	var runs restapi.OptimizationRunList
	call(alice("GET", "/v1/optimize/runs", nil), http.StatusOK, &runs)
	call(alice("GET", "/v1/optimize/runs/"+run.ID, nil), http.StatusOK, &run)
	var selected restapi.EliteSelected
	call(alice("POST", "/v1/optimize/runs/"+run.ID+"/select", restapi.EliteSelectRequest{CandidateID: "pc_contract"}), http.StatusOK, &selected)
	call(alice("POST", "/v1/optimize/runs", restapi.OptimizationRunCreate{Budget: 20}), http.StatusAccepted, &run)
	call(alice("POST", "/v1/optimize/runs/"+run.ID+"/cancel", nil), http.StatusAccepted, &run)
	call(alice("POST", "/v1/optimize/runs/"+run.ID+"/cancel", nil), http.StatusConflict, nil)

	// The server's report, for an administrator and a user.
	var info restapi.ServerInfo
	call(admin("GET", "/v1/server-info", nil), http.StatusOK, &info)
	call(alice("GET", "/v1/server-info", nil), http.StatusOK, &info)
	if info.Models["llm"].URL != "" {
		t.Fatalf("a user sees the llm's url: %+v", info.Models["llm"])
	}

	call(alice("DELETE", "/v1/conversations/"+cid, nil), http.StatusNoContent, nil)
	call(alice("GET", "/v1/conversations/"+cid, nil), http.StatusNotFound, nil)

	// Every documented operation was driven, but the streams.
	streams := []string{"GET /v1/ws", "GET /v1/conversations/{id}/timeline/stream"}
	for _, op := range c.operations() {
		if !c.driven[op] && !slices.Contains(streams, op) {
			t.Errorf("%s is documented but no call of this test checks it", op)
		}
	}
}
