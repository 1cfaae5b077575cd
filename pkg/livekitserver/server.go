package livekitserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/alicia-voice/alicia/pkg/childproc"
)

// Options configure Start. The zero value runs a server on 127.0.0.1 with
// generated credentials and free ports.
type Options struct {
	// Bin is the livekit-server binary. Empty means Find().
	Bin string
	// IP is the address the signalling port and the ICE UDP mux bind to.
	// Empty means 127.0.0.1. "0.0.0.0" binds every address (NodeIP must
	// then be set).
	IP string
	// NodeIP is the address advertised in ICE candidates. Empty means IP.
	NodeIP string
	// Port is the HTTP/WebSocket signalling port, RTCTCPPort the ICE/TCP
	// port (bound on every address) and RTCUDPPort the single ICE UDP port.
	// Zero means a free port.
	Port, RTCTCPPort, RTCUDPPort int
	// APIKey and APISecret are the credentials the server accepts. Empty
	// means generated (NewKey, NewSecret). A secret must have at least
	// MinSecretLen characters.
	APIKey, APISecret string
	// Dir holds the config file (and the log when Log is nil). Empty means a
	// temporary directory, removed by Stop.
	Dir string
	// Log receives the server's output. Nil means the file
	// livekit-server.log in Dir.
	Log io.Writer
	// LogLevel is the server's log level. Empty means warn.
	LogLevel string
	// StartTimeout bounds the wait for the server to answer. Zero means 30 s.
	StartTimeout time.Duration
}

// Server is a running livekit-server.
type Server struct {
	// URL is the signalling URL clients connect to: ws://IP:Port.
	URL string
	// APIKey and APISecret sign access tokens the server accepts.
	APIKey, APISecret string
	// IP, NodeIP and the ports the server uses.
	IP, NodeIP                   string
	Port, RTCTCPPort, RTCUDPPort int
	// ConfigPath is the config file; LogPath the log file ("" when
	// Options.Log was given).
	ConfigPath, LogPath string

	proc *childproc.Process
}

// Start runs livekit-server with a generated config (see the package
// documentation) and returns once http://IP:Port/ answers. ctx bounds the
// start only; Stop ends the server. Ports chosen here that another process
// takes before the server binds them are chosen again (three attempts).
func Start(ctx context.Context, opts Options) (*Server, error) {
	o, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	attempts := 1
	if o.Port == 0 || o.RTCTCPPort == 0 || o.RTCUDPPort == 0 {
		attempts = 3
	}
	return childproc.StartIn(ctx, "livekitserver", o.Dir, "livekit-server-", attempts, ErrExited, func(dir, temp string) (*Server, error) {
		o.Dir = dir
		try, err := choosePorts(o)
		if err != nil {
			return nil, err
		}
		return launch(ctx, try, temp)
	})
}

// resolve fills the defaults and checks the options.
func resolve(o Options) (Options, error) {
	if o.IP == "" {
		o.IP = "127.0.0.1"
	}
	ip := net.ParseIP(o.IP)
	if ip == nil {
		return o, fmt.Errorf("%w: IP %q is not an IP address", ErrBadOptions, o.IP)
	}
	if o.NodeIP == "" {
		if ip.IsUnspecified() {
			return o, fmt.Errorf("%w: IP %s binds every address: set NodeIP to the address clients reach", ErrBadOptions, o.IP)
		}
		o.NodeIP = o.IP
	}
	if n := net.ParseIP(o.NodeIP); n == nil || n.IsUnspecified() {
		return o, fmt.Errorf("%w: NodeIP %q is not a specific IP address", ErrBadOptions, o.NodeIP)
	}
	switch {
	case o.APIKey == "" && o.APISecret == "":
		o.APIKey, o.APISecret = NewKey(), NewSecret()
	case o.APIKey == "" || o.APISecret == "":
		return o, fmt.Errorf("%w: give both an API key and a secret, or neither", ErrBadOptions)
	case len(o.APISecret) < MinSecretLen:
		return o, fmt.Errorf("%w: the API secret has %d characters, livekit-server wants at least %d", ErrBadOptions, len(o.APISecret), MinSecretLen)
	}
	if o.LogLevel == "" {
		o.LogLevel = "warn"
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	var err error
	o.Bin, err = childproc.BinOr(o.Bin, Find)
	return o, err
}

// choosePorts gives every zero port a free one. The listeners are held
// until all are chosen so the three differ.
func choosePorts(o Options) (Options, error) {
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close() //nolint:errcheck // a listener held only to reserve its port
		}
	}()
	if o.Port == 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(o.IP, "0"))
		if err != nil {
			return o, fmt.Errorf("livekitserver: no free TCP port on %s: %w", o.IP, err)
		}
		closers = append(closers, l)
		o.Port = l.Addr().(*net.TCPAddr).Port
	}
	if o.RTCTCPPort == 0 {
		l, err := net.Listen("tcp", ":0") // LiveKit binds its ICE/TCP port on every address
		if err != nil {
			return o, fmt.Errorf("livekitserver: no free TCP port: %w", err)
		}
		closers = append(closers, l)
		o.RTCTCPPort = l.Addr().(*net.TCPAddr).Port
	}
	if o.RTCUDPPort == 0 {
		c, err := net.ListenPacket("udp", net.JoinHostPort(o.IP, "0"))
		if err != nil {
			return o, fmt.Errorf("livekitserver: no free UDP port on %s: %w", o.IP, err)
		}
		closers = append(closers, c)
		o.RTCUDPPort = c.LocalAddr().(*net.UDPAddr).Port
	}
	return o, nil
}

// launch writes the config, starts the process and waits until it answers.
func launch(ctx context.Context, o Options, tempDir string) (*Server, error) {
	conf, err := render(o)
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL: "ws://" + net.JoinHostPort(o.IP, strconv.Itoa(o.Port)), APIKey: o.APIKey, APISecret: o.APISecret,
		IP: o.IP, NodeIP: o.NodeIP, Port: o.Port, RTCTCPPort: o.RTCTCPPort, RTCUDPPort: o.RTCUDPPort,
		ConfigPath: filepath.Join(o.Dir, "livekit-server.yaml"),
	}
	if net.ParseIP(o.IP).IsUnspecified() {
		s.URL = "ws://" + net.JoinHostPort(o.NodeIP, strconv.Itoa(o.Port))
	}
	if o.Log == nil {
		s.LogPath = filepath.Join(o.Dir, "livekit-server.log")
	}
	// The server runs in its own process group: a terminal's ^C reaches
	// the launcher, which stops the server in order; it does not outlive a
	// launcher that is killed.
	s.proc, err = childproc.Start(ctx, childproc.Options{
		Name: "livekitserver", Path: o.Bin, Args: []string{"--config", s.ConfigPath}, Dir: o.Dir, Env: childEnv(),
		Config: conf, ConfigPath: s.ConfigPath,
		Log: o.Log, LogPath: s.LogPath,
		Ready:        childproc.HTTPAnswers(s.HTTPURL() + "/"),
		PollInterval: 20 * time.Millisecond, ReadyTimeout: o.StartTimeout, Exited: ErrExited, RemoveDir: tempDir,
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// dialIP is the address to reach the signalling port at.
func (s *Server) dialIP() string {
	if net.ParseIP(s.IP).IsUnspecified() {
		return s.NodeIP
	}
	return s.IP
}

// HTTPURL is the server's HTTP base URL (http://IP:Port), for its Twirp API.
func (s *Server) HTTPURL() string {
	return "http://" + net.JoinHostPort(s.dialIP(), strconv.Itoa(s.Port))
}

// Done is closed when the server process has ended.
func (s *Server) Done() <-chan struct{} { return s.proc.Done() }

// Err is why the process ended (nil before it has).
func (s *Server) Err() error {
	exited, err := s.proc.Exited()
	switch {
	case !exited:
		return nil
	case err != nil:
		return fmt.Errorf("%w: %v", ErrExited, err)
	default:
		return ErrExited
	}
}

// Output returns the last 16 KiB the server printed.
func (s *Server) Output() string { return s.proc.Output() }

// Stop ends the server: SIGTERM (which waits for participants), a second
// SIGTERM after a second (which does not), SIGKILL after five more. It
// removes the temporary directory Start made. Calling it again does nothing.
func (s *Server) Stop() error {
	return s.proc.Stop(childproc.Step{Signal: syscall.SIGTERM, Wait: time.Second}, childproc.Step{Signal: syscall.SIGTERM, Wait: 5 * time.Second})
}
