// Package convcmd implements the conversation commands over the gateway's
// REST API: `alicia list`, `show`, `new` and `delete`.
package convcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

// TimeFormat is how the commands print times (local time zone).
const TimeFormat = "2006-01-02 15:04"

// ListOptions of `alicia list`.
type ListOptions struct {
	Status string // active (default), archived or all
	Limit  int    // how many conversations at most (default 50)
	JSON   bool   // a JSON array of the conversations as the API gives them
}

// maxPage is the API's largest page.
const maxPage = 200

// List prints the user's conversations, newest first.
func List(ctx context.Context, c *api.Client, o ListOptions, out io.Writer) error {
	switch o.Status {
	case "", "active", "archived", "all":
	default:
		return fmt.Errorf("--status must be active, archived or all, not %q", o.Status)
	}
	if o.Limit <= 0 {
		o.Limit = 50
	}
	var convs []api.Conversation
	var raw []json.RawMessage
	cursor := ""
	for len(convs) < o.Limit {
		page, err := c.ListConversations(ctx, api.ListOptions{Status: o.Status, Limit: min(o.Limit-len(convs), maxPage), Cursor: cursor})
		if err != nil {
			return err
		}
		convs = append(convs, page.Conversations...)
		raw = append(raw, page.Raw...)
		if page.NextCursor == "" || len(page.Conversations) == 0 {
			break
		}
		cursor = page.NextCursor
	}
	if len(convs) > o.Limit {
		convs, raw = convs[:o.Limit], raw[:o.Limit]
	}
	if o.JSON {
		if raw == nil {
			raw = []json.RawMessage{}
		}
		return writeJSON(out, raw)
	}
	if len(convs) == 0 {
		_, err := fmt.Fprintln(out, "No conversations.")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTITLE\tSTATUS\tUPDATED\tMESSAGES")
	for _, cv := range convs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", cv.ID, clip(style.Printable(titleOf(cv)), 40), style.Printable(cv.Status), api.Updated(cv).Format(TimeFormat), cv.MessageCount)
	}
	return tw.Flush()
}

// ShowOptions of `alicia show`.
type ShowOptions struct {
	ID    string
	JSON  bool // the API's answer, indented
	Style style.Style
}

// Show prints a conversation and the messages of its current branch.
func Show(ctx context.Context, c *api.Client, o ShowOptions, out io.Writer) error {
	conv, raw, err := c.GetConversation(ctx, o.ID)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(out, raw)
	}
	s := o.Style
	fmt.Fprintf(out, "%s  %s  (%s, %d messages, updated %s)\n", s.Bold(conv.ID), style.Printable(titleOf(conv.Conversation)), style.Printable(conv.Status),
		conv.MessageCount, api.Updated(conv.Conversation).Format(TimeFormat))
	for _, m := range conv.Messages {
		fmt.Fprintln(out)
		PrintMessage(out, s, m)
	}
	return nil
}

// PrintMessage prints one stored message: what the answer used (memories,
// reasoning, tools) dimmed, then who said what.
func PrintMessage(out io.Writer, s style.Style, m api.Message) {
	m = printableMessage(m)
	const indent = "        "
	for _, mu := range m.MemoriesUsed {
		fmt.Fprintln(out, indent+s.Aside("memory", fmt.Sprintf("%s (%.2f)", clip(style.OneLine(mu.Content), 120), mu.Similarity)))
	}
	for _, r := range m.Reasoning {
		fmt.Fprintln(out, indent+s.Aside("reasoning", clip(style.OneLine(r.Content), 160)))
	}
	for _, tu := range m.ToolUses {
		fmt.Fprintln(out, indent+s.Aside("tool", storedToolLine(tu)))
	}
	var flags []string
	switch m.Status {
	case "failed":
		flags = append(flags, "failed")
	case "pending", "streaming":
		flags = append(flags, m.Status+"…")
	}
	if m.Interrupted {
		flags = append(flags, "interrupted")
	}
	if m.SiblingCount > 1 {
		flags = append(flags, fmt.Sprintf("%d versions", m.SiblingCount))
	}
	extra := ""
	if len(flags) > 0 {
		extra = " " + s.Dim("["+strings.Join(flags, ", ")+"]")
	}
	fmt.Fprintf(out, "%s %s %s%s\n", s.Dim("["+time.UnixMilli(m.CreatedAt).Format(TimeFormat)+"]"), s.Bold(Speaker(m.Role)+">"), m.Content, extra)
}

// Speaker is how a role is shown.
func Speaker(role string) string {
	switch role {
	case "user":
		return "you"
	case "assistant":
		return "alicia"
	}
	return role
}

// ToolCall is "name(arguments)" on one line.
func ToolCall(name string, args any) string {
	return name + "(" + clip(compactJSON(args), 120) + ")"
}

// ToolOutcome is "→ result" for a success, "failed (code): message" otherwise.
func ToolOutcome(ok bool, result any, errCode, errMsg string) string {
	if !ok {
		why := "failed"
		if errCode != "" {
			why += " (" + errCode + ")"
		}
		if errMsg != "" {
			why += ": " + clip(style.OneLine(errMsg), 160)
		}
		return why
	}
	if result == nil {
		return "→ (no result)"
	}
	return "→ " + clip(compactJSON(result), 160)
}

func storedToolLine(tu api.ToolUse) string {
	call := ToolCall(tu.ToolName, jsonValue(tu.Arguments))
	switch tu.Status {
	case "pending", "running":
		return call + " (" + tu.Status + "…)"
	case "cancelled":
		return call + " (cancelled)"
	}
	code, msg := text(tu.ErrorCode), text(tu.ErrorMessage)
	ok := tu.Status != "error" && code == "" && msg == ""
	return call + " " + ToolOutcome(ok, jsonValue(tu.Result), code, msg)
}

func compactJSON(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return style.OneLine(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// New creates a conversation and prints its id.
func New(ctx context.Context, c *api.Client, title string, out io.Writer) error {
	conv, err := c.CreateConversation(ctx, title)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, conv.ID)
	return err
}

// Delete soft-deletes a conversation.
func Delete(ctx context.Context, c *api.Client, id string, out io.Writer) error {
	if err := c.DeleteConversation(ctx, id); err != nil {
		return err
	}
	_, err := fmt.Fprintln(out, "deleted", id)
	return err
}

func titleOf(c api.Conversation) string {
	if strings.TrimSpace(c.Title) == "" {
		return "(untitled)"
	}
	return style.OneLine(c.Title)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func writeJSON(out io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}
