package fakeopenai

import "net/http/httptest"

// Server is a Handler listening on 127.0.0.1 for the length of a test.
type Server struct {
	*Handler
	srv *httptest.Server
}

// TB is what New needs of a test (testing.TB has it): the fake is a
// product package (alicia dev fake-models serves its Handler) and does
// not import testing.
type TB interface {
	Helper()
	Cleanup(func())
}

// New starts a fake on a free loopback port and stops it when the test ends.
func New(t TB, opts ...Option) *Server {
	t.Helper()
	h := NewHandler(opts...)
	s := &Server{Handler: h, srv: httptest.NewServer(h)}
	t.Cleanup(s.Close)
	return s
}

// URL is the API base URL, ending in /v1, as go-openai's BaseURL wants it.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Close releases held requests and stops the listener; New's cleanup calls
// it, calling it again is harmless.
func (s *Server) Close() {
	s.Handler.Close()
	s.srv.CloseClientConnections()
	s.srv.Close()
}
