package sysmon

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const childEnv = "SYSMON_TEST_CHILD"

// TestMain: as a child, the test binary reports its pid and GODEBUG, calls
// KeepAwake (which executes it again in place) and reports them again.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		fmt.Printf("%d %s\n", os.Getpid(), os.Getenv("GODEBUG"))
		if err := KeepAwake(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(t *testing.T, env ...string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GODEBUG=") || strings.HasPrefix(kv, EnvDisable+"=")
	}), append(env, childEnv+"=1")...)
	out, err := cmd.Output() // stdout: a schedtrace prints on stderr
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func TestKeepAwakeReexecutesInPlace(t *testing.T) {
	lines := child(t, "GODEBUG=madvdontneed=1")
	if len(lines) != 2 {
		t.Fatalf("want a line before and after the exec, got %q", lines)
	}
	pid1, _, _ := strings.Cut(lines[0], " ")
	pid2, godebug, _ := strings.Cut(lines[1], " ")
	if pid1 != pid2 {
		t.Errorf("pid changed across the exec: %s → %s", pid1, pid2)
	}
	if want := "madvdontneed=1," + Setting; godebug != want {
		t.Errorf("GODEBUG after the exec = %q, want %q", godebug, want)
	}
}

func TestKeepAwakeLeavesChoicesAlone(t *testing.T) {
	for _, env := range [][]string{{"GODEBUG=schedtrace=1000,scheddetail=0"}, {EnvDisable + "=off"}} {
		lines := child(t, env...)
		if len(lines) != 1 {
			t.Errorf("%v: the program was executed again: %q", env, lines)
		}
	}
}

func TestEnviron(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want []string
		ok   bool
	}{
		{[]string{"A=1"}, []string{"A=1", "GODEBUG=" + Setting}, true},
		{[]string{"GODEBUG=", "B=2"}, []string{"GODEBUG=" + Setting, "B=2"}, true},
		{[]string{"GODEBUG=gctrace=0"}, []string{"GODEBUG=gctrace=0," + Setting}, true},
		{[]string{"GODEBUG=gctrace=0, schedtrace=5"}, []string{"GODEBUG=gctrace=0, schedtrace=5"}, false},
		{[]string{EnvDisable + "=OFF"}, []string{EnvDisable + "=OFF"}, false},
		{[]string{EnvDisable + "=on"}, []string{EnvDisable + "=on", "GODEBUG=" + Setting}, true},
	} {
		got, ok := Environ(c.in)
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("Environ(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	in := []string{"GODEBUG=x=1"}
	Environ(in)
	if in[0] != "GODEBUG=x=1" {
		t.Error("Environ changed its input")
	}
}
