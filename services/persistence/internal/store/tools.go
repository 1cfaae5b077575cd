package store

import (
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// toolRows accumulates tool requests and results so a batch writes each kind
// with one multi-row statement, requests before results.
type toolRows struct {
	reqIDs, reqConvs, reqMessages, reqNames, reqArgs, reqExec []string
	reqTimeouts                                               []*int32
	reqTraces                                                 []*string
	reqAt                                                     []time.Time

	resIDs, resConvs, resStatus    []string
	resResult, resCode, resMessage []*string
	resAt                          []time.Time
}

func (r *toolRows) request(cid string, b *protocol.ToolUseRequest, args []byte, trace *string, at time.Time) {
	a := "{}"
	if args != nil {
		a = string(args)
	}
	r.reqIDs = append(r.reqIDs, b.ID)
	r.reqConvs = append(r.reqConvs, cid)
	r.reqMessages = append(r.reqMessages, b.MessageID)
	r.reqNames = append(r.reqNames, b.ToolName)
	r.reqArgs = append(r.reqArgs, a)
	r.reqExec = append(r.reqExec, string(b.Execution))
	r.reqTimeouts = append(r.reqTimeouts, b.TimeoutMs)
	r.reqTraces = append(r.reqTraces, trace)
	r.reqAt = append(r.reqAt, at)
}

func (r *toolRows) result(cid string, b *protocol.ToolUseResult, result []byte, at time.Time) {
	status := "success"
	var code *string
	if !b.Success {
		status = "error"
		if b.ErrorCode != nil {
			c := string(*b.ErrorCode)
			code = &c
		}
	}
	var res *string
	if result != nil {
		s := string(result)
		res = &s
	}
	r.resIDs = append(r.resIDs, b.RequestID)
	r.resConvs = append(r.resConvs, cid)
	r.resStatus = append(r.resStatus, status)
	r.resResult = append(r.resResult, res)
	r.resCode = append(r.resCode, code)
	r.resMessage = append(r.resMessage, b.ErrorMessage)
	r.resAt = append(r.resAt, at)
}

// flushTools queues the accumulated tool requests (numbered per message after
// the ones already stored; a redelivered request is left out before
// numbering) and then the results.
func (w *writer) flushTools() {
	r := &w.tools
	w.guardTools(r.reqMessages, r.reqConvs, refMessage)
	if len(r.reqIDs) > 0 {
		w.q(`INSERT INTO alicia_tool_uses (id, conversation_id, message_id, tool_name, tool_arguments, status, execution, timeout_ms,
				sequence_number, trace_id, created_at, updated_at)
			SELECT x.id, x.c, x.m, x.n, x.a::jsonb, 'pending', x.e::tool_execution, x.t,
				(SELECT count(*) FROM alicia_tool_uses u WHERE u.message_id = x.m AND u.deleted_at IS NULL)
					+ row_number() OVER (PARTITION BY x.m ORDER BY x.ord),
				x.tr, x.at, x.at
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::timestamptz[], $9::text[])
				WITH ORDINALITY AS x(id, c, m, n, a, e, t, at, tr, ord)
			WHERE NOT EXISTS (SELECT 1 FROM alicia_tool_uses u WHERE u.id = x.id)
			ON CONFLICT (id) DO NOTHING`,
			r.reqIDs, r.reqConvs, r.reqMessages, r.reqNames, r.reqArgs, r.reqExec, r.reqTimeouts, r.reqAt, r.reqTraces)
	}
	// After the requests are in: a result naming a request of another
	// conversation written by this batch is caught too.
	w.guardTools(append(append([]string(nil), r.reqIDs...), r.resIDs...), append(append([]string(nil), r.reqConvs...), r.resConvs...), refToolUse)
	if len(r.resIDs) > 0 {
		w.q(`UPDATE alicia_tool_uses u SET status = x.s::tool_use_status, tool_result = x.r::jsonb, error_code = x.ec,
				error_message = x.em, completed_at = x.at,
				processing_duration_ms = GREATEST(0, (EXTRACT(EPOCH FROM (x.at - u.created_at)) * 1000)::int)
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::text[]) AS x(id, s, r, ec, em, at, c)
			WHERE u.id = x.id AND u.completed_at IS NULL AND u.conversation_id = x.c`,
			r.resIDs, r.resStatus, r.resResult, r.resCode, r.resMessage, r.resAt, r.resConvs)
	}
	*r = toolRows{}
}
