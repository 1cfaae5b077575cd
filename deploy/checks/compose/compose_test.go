package compose_test

import (
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/deploy/checks/compose"
)

// Anchors, aliases and merge keys (a mapping, a list of mappings, and keys
// after the merge that override it) resolve as compose resolves them.
func TestParseMergeKeys(t *testing.T) {
	f, err := compose.Parse([]byte(`
x-base: &base
  restart: unless-stopped
  environment: &env
    A: from-env
    B: from-env
x-more: &more
  B: from-more
  C: from-more
x-deps: &deps
  nats: {condition: service_healthy}
services:
  one:
    <<: *base
    build: {context: ., dockerfile: deploy/Dockerfile, args: {SERVICE: one}}
    environment:
      <<: [*env, *more]
      C: own
    depends_on:
      <<: *deps
      db: {condition: service_completed_successfully}
      other:
    secrets: [s1, {source: s2, target: /etc/s2}]
    command: migrate up
    volumes: [data:/data, ./conf:/conf:ro]
  two:
    image: x:1.2.3
    environment: [K=V, EMPTY=]
    depends_on: [one]
    healthcheck: {test: ["CMD", "true"]}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	one := f.Services["one"]
	if one.Restart != "unless-stopped" || one.Name != "one" {
		t.Errorf("merged service: restart %q, name %q", one.Restart, one.Name)
	}
	// Earlier mappings of a merge list win over later ones; own keys win over both.
	for k, want := range map[string]string{"A": "from-env", "B": "from-env", "C": "own"} {
		if got := one.Environment[k]; got != want {
			t.Errorf("environment %s = %q, want %q", k, got, want)
		}
	}
	if one.DependsOn["nats"].Condition != compose.Healthy || one.DependsOn["db"].Condition != compose.Completed ||
		one.DependsOn["other"].Condition != compose.Started {
		t.Errorf("depends_on %+v", one.DependsOn)
	}
	if one.Build.Args["SERVICE"] != "one" || one.Ref() != "build:one" {
		t.Errorf("build %+v", one.Build)
	}
	if got := []string(one.Command); strings.Join(got, "|") != "migrate|up" {
		t.Errorf("command %q", got)
	}
	if one.Secrets[0].Path() != "/run/secrets/s1" || one.Secrets[1].Path() != "/etc/s2" {
		t.Errorf("secrets %+v", one.Secrets)
	}
	if v := one.Volumes; v[0].Type != "volume" || v[0].Source != "data" || v[1].Type != "bind" || v[1].Target != "/conf" {
		t.Errorf("volumes %+v", v)
	}
	two := f.Services["two"]
	if two.Environment["K"] != "V" || two.DependsOn["one"].Condition != compose.Started || two.Healthcheck.Test[0] != "CMD" {
		t.Errorf("list forms: %+v", two)
	}
}

func TestInterpolate(t *testing.T) {
	env := map[string]string{"SET": "value", "EMPTY": ""}
	for _, tc := range []struct{ in, want, err string }{
		{in: "plain", want: "plain"},
		{in: "$$NODE_IP and $$(cat x)", want: "$NODE_IP and $(cat x)"},
		{in: "${SET}/$SET", want: "value/value"},
		{in: "${UNSET}", want: ""},
		{in: "${UNSET:-def}", want: "def"},
		{in: "${EMPTY:-def}|${EMPTY-def}", want: "def|"},
		{in: "${SET:-def}", want: "value"},
		{in: "${SET:+alt}|${UNSET:+alt}", want: "alt|"},
		{in: "ws://${UNSET:-${SET}}:7880", want: "ws://value:7880"},
		{in: "${UNSET:-ws://${SET:?need SET}:7880}", want: "ws://value:7880"},
		{in: "${UNSET:-ws://${MISSING:?set MISSING please}:7880}", err: "required variable MISSING is missing a value: set MISSING please"},
		{in: "${EMPTY:?must not be empty}", err: "EMPTY is missing a value"},
		{in: "${EMPTY?may be empty}", want: ""},
		{in: "${UNTERMINATED", err: "unterminated"},
	} {
		got, err := compose.Interpolate(tc.in, env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestPinned(t *testing.T) {
	for ref, want := range map[string]bool{
		"nats:2.12.8-alpine": true,
		"nats:2.12-alpine":   false,
		"nats:2":             false,
		"nats":               false,
		"nats:latest":        false,
		"ghcr.io/speaches-ai/speaches:latest-cuda":            false,
		"ghcr.io/speaches-ai/speaches:0.9.0-rc.3-cuda-12.6.3": true,
		"pgvector/pgvector:0.8.1-pg17":                        true,
		"pgvector/pgvector:pg17":                              false,
		"livekit/livekit-server:v1.13.5":                      true,
		"debian:bookworm-slim":                                false,
		"debian:bookworm-20251229-slim":                       true,
		"golang:1.26-bookworm":                                false,
		"golang:1.26.8-bookworm":                              true,
		"registry:5000/app":                                   false,
		"registry:5000/app:1.2.3":                             true,
		"nats@sha256:0123abcd":                                true,
	} {
		if got := compose.Pinned(ref); got != want {
			t.Errorf("Pinned(%q) = %v, want %v", ref, got, want)
		}
	}
}
