// Command devtools builds the programs of pkg/devtools into the cache and
// says where they are:
//
//	devtools install [name …]   build the missing ones (every tool without a name), two at a
//	                            time, and print one line per tool: built in how long, or already there
//	devtools path name          print the tool's path; exit 1 with the sentence naming this step
//	                            when it is not installed
//	devtools list               the tools, their modules and versions
//
// It needs no cgo and nothing of the machine but the go command, so the
// test task runs it beside the step that installs the Debian packages.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicia-voice/alicia/pkg/devtools"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devtools:", err)
		os.Exit(1)
	}
}

const usage = "usage: devtools install [name …] | devtools path <name> | devtools list"

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", usage)
	}
	switch args[0] {
	case "install":
		tools, err := named(args[1:])
		if err != nil {
			return err
		}
		return install(ctx, tools, stdout, stderr)
	case "path":
		if len(args) != 2 {
			return fmt.Errorf("%s", usage)
		}
		tools, err := named(args[1:])
		if err != nil {
			return err
		}
		p, err := tools[0].Find()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, p)
		return err
	case "list":
		for _, t := range devtools.All() {
			fmt.Fprintf(stdout, "%-15s %s@%s\n", t.Name, t.Module, t.Version)
		}
		return nil
	}
	return fmt.Errorf("%s", usage)
}

// named returns the tools called names, or every tool for none.
func named(names []string) ([]devtools.Tool, error) {
	if len(names) == 0 {
		return devtools.All(), nil
	}
	var out []devtools.Tool
	for _, n := range names {
		t, ok := devtools.Named(n)
		if !ok {
			var all []string
			for _, t := range devtools.All() {
				all = append(all, t.Name)
			}
			return nil, fmt.Errorf("no tool %q (the tools: %s)", n, strings.Join(all, ", "))
		}
		out = append(out, t)
	}
	return out, nil
}

// install builds the missing tools, two at a time (a go build already uses
// every core while it compiles; a second one fills its downloads and its
// link), and prints a line for each: its time, or that it was there.
func install(ctx context.Context, tools []devtools.Tool, stdout, stderr io.Writer) error {
	start := time.Now()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	slots := make(chan struct{}, 2)
	for _, t := range tools {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			began := time.Now()
			p, built, err := t.Ensure(ctx, stderr)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s %s: %w", t.Name, t.Version, err))
				fmt.Fprintf(stdout, "devtools: %-15s %-8s FAILED after %s\n", t.Name, t.Version, time.Since(began).Round(time.Second))
			case built:
				fmt.Fprintf(stdout, "devtools: %-15s %-8s built in %s: %s\n", t.Name, t.Version, time.Since(began).Round(time.Second), p)
			default:
				fmt.Fprintf(stdout, "devtools: %-15s %-8s already there: %s\n", t.Name, t.Version, p)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		msg := make([]string, len(errs))
		for i, e := range errs {
			msg[i] = e.Error()
		}
		return fmt.Errorf("%s", strings.Join(msg, "; "))
	}
	fmt.Fprintf(stdout, "devtools: %d tools ready in %s\n", len(tools), time.Since(start).Round(time.Second))
	return nil
}
