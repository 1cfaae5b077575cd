package rpc

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Detach returns a request that may be answered after the micro handler
// has returned (from another goroutine). micro reads a request's error
// state once its handler returns, so answering the original request later
// is a data race; the detached copy answers through nc directly. micro's
// error statistics do not count detached errors.
func Detach(nc *nats.Conn, r micro.Request) micro.Request {
	return &detached{nc: nc, data: r.Data(), headers: r.Headers(), subject: r.Subject(), reply: r.Reply()}
}

type detached struct {
	nc      *nats.Conn
	data    []byte
	headers micro.Headers
	subject string
	reply   string
}

func (d *detached) Respond(data []byte, opts ...micro.RespondOpt) error {
	return d.nc.PublishMsg(&nats.Msg{Subject: d.reply, Data: data, Header: nats.Header{}})
}

func (d *detached) RespondJSON(v any, opts ...micro.RespondOpt) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return d.Respond(b, opts...)
}

func (d *detached) Error(code, description string, data []byte, opts ...micro.RespondOpt) error {
	h := nats.Header{}
	h.Set(micro.ErrorCodeHeader, code)
	h.Set(micro.ErrorHeader, description)
	return d.nc.PublishMsg(&nats.Msg{Subject: d.reply, Data: data, Header: h})
}

func (d *detached) Data() []byte           { return d.data }
func (d *detached) Headers() micro.Headers { return d.headers }
func (d *detached) Subject() string        { return d.subject }
func (d *detached) Reply() string          { return d.reply }

// FromMsg makes a request received on a plain subscription (outside a
// micro service) answerable like a micro one.
func FromMsg(nc *nats.Conn, m *nats.Msg) micro.Request {
	return &detached{nc: nc, data: m.Data, headers: micro.Headers(m.Header), subject: m.Subject, reply: m.Reply}
}
