// Package sysmon keeps the Go runtime's monitor thread out of deep sleep
// in a process that handles a packet every few milliseconds.
//
// When every P is idle, sysmon parks on a note, and the next system call
// or cgo call (a UDP read, an Opus decode) has to wake it with a futex;
// it then polls every 20 µs until the process idles again and parks once
// more. A voice agent idles between packets, so that happened for nearly
// every packet: about a third of the room-agent's CPU per session
// (BenchmarkSessionCPU in services/e2e/voice). With the
// runtime's schedtrace setting on, sysmon never parks (runtime/proc.go:
// "sysmon should not enter deep sleep if schedtrace is enabled") and backs
// off to its 10 ms tick instead, about 100 wake-ups a second for the whole
// process. The period chosen is the longest the runtime takes, so the
// trace line itself goes to stderr once every 24.8 days (and once at the
// start on a host up for longer than that).
//
// GODEBUG is read once when the runtime starts, so the setting is applied
// by executing the program again, in place (same pid), with it added.
package sysmon

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Setting is what KeepAwake adds to GODEBUG.
const Setting = "schedtrace=2147483647"

// EnvDisable set to "off" keeps the runtime's default behaviour.
const EnvDisable = "ALICIA_SYSMON_AWAKE"

// KeepAwake re-executes the running program with Setting in GODEBUG,
// unless GODEBUG already has a schedtrace setting or EnvDisable is "off".
// It returns only when it did not re-execute: nil when nothing was to be
// done, an error when the exec failed (the program can go on without it).
func KeepAwake() error {
	env, ok := Environ(os.Environ())
	if !ok {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("sysmon: %w", err)
	}
	if err := syscall.Exec(exe, os.Args, env); err != nil {
		return fmt.Errorf("sysmon: exec %s: %w", exe, err)
	}
	return nil // not reached
}

// Environ returns environ with Setting added to GODEBUG (keeping what is
// there), and false when nothing should change.
func Environ(environ []string) ([]string, bool) {
	godebug, at := "", -1
	for i, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case EnvDisable:
			if strings.EqualFold(v, "off") {
				return environ, false
			}
		case "GODEBUG":
			godebug, at = v, i
		}
	}
	for _, s := range strings.Split(godebug, ",") {
		if k, _, _ := strings.Cut(strings.TrimSpace(s), "="); k == "schedtrace" {
			return environ, false // the operator chose a schedtrace
		}
	}
	out := append([]string(nil), environ...)
	if at < 0 {
		return append(out, "GODEBUG="+Setting), true
	}
	if godebug == "" {
		out[at] = "GODEBUG=" + Setting
	} else {
		out[at] = "GODEBUG=" + godebug + "," + Setting
	}
	return out, true
}
