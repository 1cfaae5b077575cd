// Package rest serves the gateway's JSON API under /v1 (see API.md): reads
// from Postgres through a read-only store, writes by publishing protocol
// envelopes and answering once persistence has applied them, memory writes
// and search through the memory service.
package rest

import (
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/netguard"
	"github.com/alicia-voice/alicia/pkg/promptver"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/conns"
	"github.com/alicia-voice/alicia/services/gateway/internal/livekit"
	"github.com/alicia-voice/alicia/services/gateway/internal/probe"
	"github.com/alicia-voice/alicia/services/gateway/internal/store"
)

// API holds what the handlers need.
type API struct {
	Store  *store.Store
	NC     *nats.Conn
	Pub    *bus.Publisher
	Probe  *probe.Prober
	Pinger Pinger // Postgres, for server-info
	Log    zerolog.Logger
	// WriteTimeout bounds a write: publish, then wait until applied.
	WriteTimeout time.Duration
	// LiveKit issues room tokens; nil when LiveKit is not configured.
	LiveKit *livekit.Tokens
	// readBounds bound the timeline pages read at once
	// (LimitTimelineReads; the defaults until it is called).
	readBounds atomic.Pointer[timelineReads]
	// LiveKitSameOrigin: a token's URL is the page's own WebSocket
	// origin, the gateway forwarding the signalling (ALICIA_LIVEKIT_SAME_ORIGIN).
	LiveKitSameOrigin bool
	// Agents asks for a room-agent when a token is handed out.
	Agents AgentRequester
	// Rooms ends LiveKit participation in a deleted conversation's room;
	// nil when LiveKit is not configured.
	Rooms RoomEnder
	// Sessions, when set, is asked again once a timeline stream opened
	// with a session cookie is counted (a sign-out in between would
	// otherwise go unheard).
	Sessions auth.SessionFinder
	// MCPAllowedHosts may be HTTP MCP servers though not public
	// (ALICIA_MCP_ALLOWED_HOSTS); other hosts must resolve to public
	// addresses.
	MCPAllowedHosts []string
	// WakeWords address Alicia in hands-free mode (server-info; none:
	// wake.DefaultWords).
	WakeWords []string
	// Resolver looks up MCP server hosts; nil: the system's.
	Resolver netguard.Resolver
	// Prompts reads the prompt versions (prompts.go).
	Prompts *promptver.Reader
	// Admins are the administrators now (installation-wide optimisation
	// runs learn from their conversations; optimize.go).
	Admins func() []string
	// StreamsPerUser bounds a user's open timeline streams on this replica
	// (GET /v1/conversations/{id}/timeline/stream; 0: no limit, 429
	// beyond); Shutdown ends them.
	StreamsPerUser int
	// Accounts enforce the users' budgets (edge.Budgets), shared with the
	// WebSocket; nil: only the text budgets of Budgets apply.
	Accounts *edge.Accounts
	// Prefs: the installation's voice defaults and the speech engine's
	// voices (settings.go).
	Prefs   Prefs
	Budgets edge.Budgets
	// Backlog refuses writes (503 with Retry-After) while the stream is
	// too far ahead of persistence (pkg/backlog; nil: never).
	Backlog edge.Backlog

	streams conns.Tracker
}

// Register adds the routes to g (the authenticated /v1 group).
func (a *API) Register(g *echo.Group) {
	g.POST("/conversations", a.createConversation)
	g.GET("/conversations", a.listConversations)
	g.GET("/conversations/:id", a.getConversation)
	g.PUT("/conversations/:id/preferences", a.putConversationPreferences)
	g.GET("/settings", a.getSettings)
	g.PUT("/settings", a.putSettings)
	g.PATCH("/conversations/:id", a.patchConversation)
	g.DELETE("/conversations/:id", a.deleteConversation)
	g.POST("/conversations/:id/token", a.conversationToken)
	g.GET("/conversations/:id/token", a.conversationTokenByGet)
	g.GET("/conversations/:id/timeline", a.conversationTimeline)
	g.GET("/conversations/:id/timeline/stream", a.conversationTimelineStream)
	g.GET("/messages/:id/siblings", a.siblings)

	g.POST("/messages/:id/votes", a.vote)
	g.GET("/messages/:id/notes", a.listNotes)
	g.POST("/messages/:id/notes", a.createNote)
	g.DELETE("/notes/:id", a.deleteNote)

	g.GET("/memories", a.listMemories)
	g.POST("/memories", a.createMemory)
	g.PATCH("/memories/:id", a.patchMemory)
	g.DELETE("/memories/:id", a.deleteMemory)
	g.POST("/memories/:id/pin", a.pinMemory)
	g.POST("/memories/:id/archive", a.archiveMemory)
	g.PUT("/memories/:id/rating", a.rateMemory)
	g.GET("/memories/:id/uses", a.memoryUses)
	// Timers and reminders (set by the llm's tools).
	g.GET("/timers", a.listTimers)
	g.DELETE("/timers/:id", a.cancelTimer)

	// Tools and MCP servers are the installation's: everyone may list them
	// (internals only for administrators), administrators change them.
	g.GET("/tools", a.listTools)
	g.PATCH("/tools/:name", a.patchTool, auth.RequireAdmin)
	g.GET("/mcp-servers", a.listMCPServers)
	g.PUT("/mcp-servers/:name", a.putMCPServer, auth.RequireAdmin)
	g.PATCH("/mcp-servers/:name", a.patchMCPServer, auth.RequireAdmin)
	g.DELETE("/mcp-servers/:name", a.deleteMCPServer, auth.RequireAdmin)

	// Prompt versions: a person's own, the installation's for
	// administrators to change (prompts.go).
	g.GET("/prompt-versions", a.listPromptVersions)
	g.POST("/prompt-versions/rollback", a.rollbackPromptVersion)
	g.POST("/prompt-versions/:id/promote", a.promotePromptVersion)

	// Prompt optimisation: a person's own runs, the installation's for
	// administrators (optimize.go).
	g.GET("/optimize/preferences", a.getOptimizePreferences)
	g.PUT("/optimize/preferences", a.putOptimizePreferences)
	g.GET("/optimize/sharing", a.getOptimizeSharing)
	g.PUT("/optimize/sharing", a.putOptimizeSharing)
	g.GET("/optimize/runs", a.listOptimizationRuns)
	g.POST("/optimize/runs", a.createOptimizationRun)
	g.GET("/optimize/runs/:id", a.getOptimizationRun)
	g.POST("/optimize/runs/:id/cancel", a.cancelOptimizationRun)
	g.POST("/optimize/runs/:id/select", a.selectElite)

	g.GET("/server-info", a.serverInfo)
}
