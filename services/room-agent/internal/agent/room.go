package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/livekit/media-sdk"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/pion/webrtc/v4"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
)

// Deps are what rooms share.
type Deps struct {
	NC      *nats.Conn
	JS      jetstream.JetStream
	Log     zerolog.Logger
	Metrics *Metrics
	// Users holds the per-user envelope rates shared by the rooms of the
	// agent (New makes one when nil).
	Users *edge.UserRates
	// Accounts enforce the per-user budgets over the rooms of the agent
	// (New makes one from Config.Budgets when nil).
	Accounts *edge.Accounts
	// Backlog refuses data-channel input while the stream is too far
	// ahead of persistence (pkg/backlog; nil: never).
	Backlog edge.Backlog
}

// Room is the agent's presence in one conversation's room.
type Room struct {
	cfg  Config
	d    Deps
	cid  string
	user string
	log  zerolog.Logger
	pub  *bus.Publisher

	lk     *lksdk.Room
	player *Player
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	sessions  map[string]participantSession // participant identity → data-channel session
	listeners map[string]*listener          // track sid → listener
	specs     specs                         // speculative jobs waiting for their transcript
	humans    map[string]bool
	emptyAt   time.Time
	voiceCfg  map[string]bool // identities whose Configuration asked for audio_output
	turns     *tracker
	left      chan struct{}
	leftOnce  sync.Once
	// stats counts the voice session for its SessionStats (stats.go).
	stats sessionStats
}

// Join connects to the conversation's room and starts bridging. It returns
// once joined (or failed within cfg.JoinTimeout).
func Join(ctx context.Context, cfg Config, d Deps, disp *protocol.AgentDispatch) (*Room, error) {
	cid := disp.ConversationID
	r := &Room{cfg: cfg, d: d, cid: cid, log: d.Log.With().Str("conversation_id", cid).Logger(), pub: bus.NewPublisher(d.JS),
		sessions: map[string]participantSession{}, listeners: map[string]*listener{}, humans: map[string]bool{},
		voiceCfg: map[string]bool{}, left: make(chan struct{}), emptyAt: time.Now()}
	if disp.UserID != nil {
		r.user = *disp.UserID
	}
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.stats.began = time.Now()
	r.turns = newTracker(r, newTurnMetrics(d.Metrics, cfg.OnVoiceToVoice))
	player, err := NewPlayer(r.turns.onPlay)
	if err != nil {
		r.cancel()
		return nil, fmt.Errorf("agent: player: %w", err)
	}
	r.player = player
	// What the player writes may come back through each microphone (echo).
	player.Tap(func(pcm media.PCM16Sample, at time.Time) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, l := range r.listeners {
			l.echo.Played(pcm, at)
		}
	})

	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = r.onData
	cb.OnTrackPublished = r.onTrackPublished
	cb.OnTrackSubscribed = r.onTrackSubscribed
	cb.OnTrackUnsubscribed = r.onTrackUnsubscribed
	cb.OnParticipantConnected = r.onParticipantConnected
	cb.OnParticipantDisconnected = r.onParticipantDisconnected
	cb.OnDisconnected = func() { r.leave() }

	joined := make(chan error, 1)
	go func() {
		lk, err := lksdk.ConnectToRoom(cfg.LiveKitURL, lksdk.ConnectInfo{APIKey: cfg.APIKey, APISecret: cfg.APISecret,
			RoomName: protocol.RoomName(cid), ParticipantIdentity: Identity, ParticipantName: "Alicia", ParticipantKind: lksdk.ParticipantAgent},
			cb, lksdk.WithAutoSubscribe(false))
		if err == nil {
			r.mu.Lock()
			r.lk = lk
			r.mu.Unlock()
		}
		joined <- err
	}()
	select {
	case err := <-joined:
		if err != nil {
			r.cancel()
			return nil, fmt.Errorf("agent: join %s: %w", protocol.RoomName(cid), err)
		}
	case <-time.After(cfg.JoinTimeout):
		r.cancel()
		go func() { // a join that completes late is undone
			if err := <-joined; err == nil {
				r.lk.Disconnect()
			}
		}()
		return nil, fmt.Errorf("agent: join %s: timed out after %v", protocol.RoomName(cid), cfg.JoinTimeout)
	}
	if _, err := r.lk.LocalParticipant.PublishTrack(player.Track(), &lksdk.TrackPublicationOptions{Name: "alicia-voice", Source: 2 /* microphone */}); err != nil {
		r.Close()
		return nil, fmt.Errorf("agent: publish track: %w", err)
	}
	if err := r.start(); err != nil {
		r.Close()
		return nil, err
	}
	// Participants already in the room.
	for _, p := range r.lk.GetRemoteParticipants() {
		r.onParticipantConnected(p)
		for _, pub := range p.TrackPublications() {
			if rp, ok := pub.(*lksdk.RemoteTrackPublication); ok {
				r.onTrackPublished(rp, p)
			}
		}
	}
	r.log.Info().Str("room", protocol.RoomName(cid)).Msg("joined")
	return r, nil
}

// start subscribes to playout audio, the speculative transcripts and the
// conversation's answers.
func (r *Room) start() error {
	subs, err := r.routes().Subscribe(r.ctx, r.d.NC)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := r.turns.follow(r.ctx); err != nil {
		subs.Close()
		return err
	}
	// Whether a call is open here: the llm asks before delivering a timer.
	unserve, err := rpc.ServeVoiceRoom(r.d.NC, r.cid, func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.humans)
	})
	if err != nil {
		subs.Close()
		return fmt.Errorf("agent: %w", err)
	}
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.player.Run(r.ctx) }()
	go func() { <-r.ctx.Done(); subs.Close(); unserve() }()
	return nil
}

// Speaking reports whether the agent is speaking a turn in the room (or
// still recording what it played).
func (r *Room) Speaking() bool { return r.turns.speaking() }

// Done is closed when the room should be left: the connection dropped, or
// no user has been in it for EmptyTimeout.
func (r *Room) Done() <-chan struct{} { return r.left }

// Watch ends the room when it stays empty; run it in a goroutine.
func (r *Room) Watch(ctx context.Context) {
	t := time.NewTicker(min(time.Second, r.cfg.EmptyTimeout/4+time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.left:
			return
		case <-t.C:
			r.mu.Lock()
			empty := len(r.humans) == 0 && time.Since(r.emptyAt) >= r.cfg.EmptyTimeout
			r.mu.Unlock()
			if empty {
				r.log.Info().Msg("room empty; leaving")
				r.leave()
				return
			}
		}
	}
}

func (r *Room) leave() { r.leftOnce.Do(func() { close(r.left) }) }

// Close leaves the room and stops everything, after publishing the
// session's SessionStats.
func (r *Room) Close() {
	r.publishStats()
	r.leave()
	r.cancel()
	r.mu.Lock()
	lk := r.lk
	ls := r.listeners
	r.listeners = map[string]*listener{}
	r.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
	if lk != nil {
		lk.Disconnect()
	}
	r.wg.Wait()
}

func isAgent(identity string) bool {
	return identity == Identity || strings.HasPrefix(identity, "agent-")
}

// participantSession is one participant's data-channel session and what
// stops it. sid tells a rejoin apart: LiveKit gives the new connection of
// the same identity a new participant sid, and may not report the old one
// as disconnected.
type participantSession struct {
	s    *edge.Session
	sid  string
	stop context.CancelFunc
}

func (r *Room) onParticipantConnected(p *lksdk.RemoteParticipant) {
	id := p.Identity()
	if isAgent(id) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.humans[id] = true
	if old, ok := r.sessions[id]; ok {
		if old.sid == p.SID() {
			return
		}
		old.stop() // the identity joined again: its old session ends
	}
	user := id
	if r.user != "" {
		user = r.user // the room's token was issued to the conversation's owner
	}
	s := edge.NewSession(r.d.JS, roomAuth{}, dataTransport{r: r, identity: id}, edge.Options{User: user, Conversation: r.cid,
		Limits: r.cfg.Edge, Users: r.d.Users, Accounts: r.d.Accounts, Backlog: r.d.Backlog, Log: r.log, OnConfigured: func(_ string, cfg *protocol.Configuration) { r.onConfigured(id, cfg) }})
	ctx, stop := context.WithCancel(r.ctx)
	r.sessions[id] = participantSession{s: s, sid: p.SID(), stop: stop}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer stop()
		if err := s.Run(ctx); err != nil {
			r.log.Warn().Err(err).Str("participant", id).Msg("data channel session ended")
		}
	}()
}

func (r *Room) onParticipantDisconnected(p *lksdk.RemoteParticipant) {
	id := p.Identity()
	r.mu.Lock()
	ps, ok := r.sessions[id]
	if ok && ps.sid != p.SID() {
		r.mu.Unlock()
		return // an older connection of an identity that is back
	}
	// The session ends with its participant: left running, it would go on
	// forwarding to the identity, and a rejoin would get every frame twice.
	if ok {
		ps.stop()
		delete(r.sessions, id)
	}
	delete(r.humans, id)
	delete(r.voiceCfg, id)
	if len(r.humans) == 0 {
		r.emptyAt = time.Now()
	}
	r.mu.Unlock()
}

func (r *Room) onData(pkt lksdk.DataPacket, params lksdk.DataReceiveParams) {
	u, ok := pkt.(*lksdk.UserDataPacket)
	if !ok || isAgent(params.SenderIdentity) {
		return
	}
	r.mu.Lock()
	ps, ok := r.sessions[params.SenderIdentity]
	r.mu.Unlock()
	if params.Sender != nil && (!ok || ps.sid != params.Sender.SID()) {
		r.onParticipantConnected(params.Sender) // before (or without) its connected event
		r.mu.Lock()
		ps = r.sessions[params.SenderIdentity]
		r.mu.Unlock()
	}
	s := ps.s
	if s != nil {
		s.HandleClient(r.ctx, u.Payload)
	}
}

// onConfigured notes whether the participant wants spoken answers.
func (r *Room) onConfigured(identity string, cfg *protocol.Configuration) {
	voice := false
	for _, f := range cfg.Features {
		if f == protocol.ConfigurationFeaturesElemAudioOutput {
			voice = true
		}
	}
	r.mu.Lock()
	r.voiceCfg[identity] = voice
	r.mu.Unlock()
}

// onTrackPublished subscribes to users' microphones only: never to the
// agent's own audio or another agent's.
func (r *Room) onTrackPublished(pub *lksdk.RemoteTrackPublication, p *lksdk.RemoteParticipant) {
	if isAgent(p.Identity()) || pub.Kind() != lksdk.TrackKindAudio {
		return
	}
	if err := pub.SetSubscribed(true); err != nil {
		r.log.Warn().Err(err).Str("track", pub.SID()).Msg("subscribe")
	}
}

func (r *Room) onTrackSubscribed(track *webrtc.TrackRemote, pub *lksdk.RemoteTrackPublication, p *lksdk.RemoteParticipant) {
	if isAgent(p.Identity()) || track.Kind() != webrtc.RTPCodecTypeAudio {
		return
	}
	l, err := newListener(r, p.Identity(), pub.SID())
	if err != nil {
		r.log.Error().Err(err).Msg("listener")
		return
	}
	if err := l.decode(track); err != nil {
		r.log.Error().Err(err).Msg("decode user audio")
		return
	}
	r.mu.Lock()
	r.listeners[pub.SID()] = l
	voice, configured := r.voiceCfg[p.Identity()]
	r.mu.Unlock()
	if !configured || !voice {
		r.askForVoice(p.Identity())
	}
	r.log.Info().Str("track", pub.SID()).Str("participant", p.Identity()).Msg("listening")
}

// askForVoice: a participant that speaks into the room without asking for
// spoken answers gets them: the agent sends the Configuration a voice
// client would (streaming, audio_output, partial_responses).
func (r *Room) askForVoice(identity string) {
	cid := r.cid
	env := protocol.New(cid, &protocol.Configuration{ConversationID: &cid, Features: []protocol.ConfigurationFeaturesElem{
		protocol.ConfigurationFeaturesElemStreaming, protocol.ConfigurationFeaturesElemAudioOutput, protocol.ConfigurationFeaturesElemPartialResponses}})
	env.Meta = map[string]any{edge.MetaUserID: r.userOr(identity)}
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	if _, err := r.pub.PublishOnBehalf(ctx, env, ""); err != nil {
		r.log.Error().Err(err).Msg("publish voice Configuration")
		return
	}
	r.mu.Lock()
	r.voiceCfg[identity] = true
	r.mu.Unlock()
}

func (r *Room) userOr(identity string) string {
	if r.user != "" {
		return r.user
	}
	return identity
}

func (r *Room) onTrackUnsubscribed(_ *webrtc.TrackRemote, pub *lksdk.RemoteTrackPublication, _ *lksdk.RemoteParticipant) {
	r.mu.Lock()
	l := r.listeners[pub.SID()]
	delete(r.listeners, pub.SID())
	r.mu.Unlock()
	if l != nil {
		l.close()
	}
}

// roomAuth: a room's participants hold a token for that one room, which the
// gateway issued to the conversation's owner.
type roomAuth struct{}

func (roomAuth) Authorize(context.Context, string, string) error { return nil }

// broadcast sends a frame to every participant on the reliable data channel.
func (r *Room) broadcast(frame []byte) error {
	r.mu.Lock()
	lk := r.lk
	r.mu.Unlock()
	if lk == nil {
		return fmt.Errorf("agent: not in the room")
	}
	return lk.LocalParticipant.PublishDataPacket(lksdk.UserData(frame), lksdk.WithDataPublishReliable(true))
}

// dataTransport sends envelopes to one participant on the reliable data channel.
type dataTransport struct {
	r        *Room
	identity string
}

func (t dataTransport) Send(_ context.Context, frame []byte) error {
	t.r.mu.Lock()
	lk := t.r.lk
	t.r.mu.Unlock()
	if lk == nil {
		return fmt.Errorf("agent: not in the room")
	}
	return lk.LocalParticipant.PublishDataPacket(lksdk.UserData(frame), lksdk.WithDataPublishReliable(true),
		lksdk.WithDataPublishDestination([]string{t.identity}))
}
