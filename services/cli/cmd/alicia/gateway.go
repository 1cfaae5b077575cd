package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/chatcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/convcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

// gatewayFlags are the flags of the commands that talk to the gateway.
type gatewayFlags struct{ url, key string }

func (g *gatewayFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&g.url, "url", "", "gateway address (default $ALICIA_HTTP_ADDR, else "+api.DefaultAddr+")")
	c.Flags().StringVar(&g.key, "key", "", "API key (default $ALICIA_API_KEY or the file in $ALICIA_API_KEY_FILE)")
}

// client resolves the gateway's address and the key: flags first, then the
// environment, as `alicia up` sets them.
func (g *gatewayFlags) client() (*api.Client, error) {
	addr := g.url
	if addr == "" {
		config.String("ALICIA_HTTP_ADDR", &addr)
	}
	base, err := api.BaseURL(addr)
	if err != nil {
		return nil, err
	}
	key := g.key
	if key == "" {
		if err := config.Secret("ALICIA_API_KEY", &key); err != nil {
			return nil, err
		}
	}
	return api.New(base, key)
}

func chatCommand(stopSignals func()) *cobra.Command {
	var g gatewayFlags
	c := &cobra.Command{Use: "chat [conversation]", Short: "Talk with Alicia in the terminal (a new conversation, or resume one)",
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := g.client()
			if err != nil {
				return err
			}
			// Ctrl-C stops an answer instead of ending the program: take it
			// over from the default handling; SIGTERM still ends the chat.
			ints := make(chan os.Signal, 1)
			signal.Notify(ints, os.Interrupt)
			defer signal.Stop(ints)
			stopSignals()
			ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
			defer cancel()
			o := chatcmd.Options{API: client, In: c.InOrStdin(), Out: c.OutOrStdout(), Err: c.ErrOrStderr(),
				Style: style.For(os.Stdout), Interactive: style.IsTerminal(os.Stdin), Interrupts: ints}
			if len(args) == 1 {
				o.ConversationID = args[0]
			}
			return chatcmd.Run(ctx, o)
		}}
	g.add(c)
	return c
}

func conversationCommands() []*cobra.Command {
	var lg, sg, ng, dg gatewayFlags
	var lo convcmd.ListOptions
	list := &cobra.Command{Use: "list", Short: "List your conversations, newest first", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			client, err := lg.client()
			if err != nil {
				return err
			}
			return convcmd.List(c.Context(), client, lo, c.OutOrStdout())
		}}
	lg.add(list)
	list.Flags().StringVar(&lo.Status, "status", "active", "active, archived or all")
	list.Flags().IntVar(&lo.Limit, "limit", 50, "at most this many conversations")
	list.Flags().BoolVar(&lo.JSON, "json", false, "a JSON array of the conversations")

	var so convcmd.ShowOptions
	show := &cobra.Command{Use: "show <conversation>", Short: "Print a conversation's messages (current branch) with tools and memories",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := sg.client()
			if err != nil {
				return err
			}
			so.ID, so.Style = args[0], style.For(os.Stdout)
			return convcmd.Show(c.Context(), client, so, c.OutOrStdout())
		}}
	sg.add(show)
	show.Flags().BoolVar(&so.JSON, "json", false, "the API's JSON")

	var title string
	create := &cobra.Command{Use: "new", Short: "Create a conversation and print its id", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			client, err := ng.client()
			if err != nil {
				return err
			}
			return convcmd.New(c.Context(), client, title, c.OutOrStdout())
		}}
	ng.add(create)
	create.Flags().StringVar(&title, "title", "", "title of the conversation")

	del := &cobra.Command{Use: "delete <conversation>", Short: "Delete a conversation", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := dg.client()
			if err != nil {
				return err
			}
			return convcmd.Delete(c.Context(), client, args[0], c.OutOrStdout())
		}}
	dg.add(del)
	return []*cobra.Command{list, show, create, del}
}
