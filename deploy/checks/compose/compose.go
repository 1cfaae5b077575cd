// Package compose checks the repository's docker-compose.yml against
// the code and images it deploys: every variable an Alicia service is given
// is one its binary reads, everything a service needs is behind a
// depends_on condition, no image floats, commands name flags the pinned
// images accept, the secret files a service is pointed at are mounted, and
// every long-running service has a healthcheck that can run in its image.
// Its tests run these checks on the real file (and on broken copies), and
// `docker compose config -q` with the compose plugin built from its Go
// module (Plugin).
package compose

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// File is the part of a compose file the checks read. Anchors, aliases and
// merge keys (<<) are resolved as compose resolves them; ${…} is
// interpolated from the environment Load is given.
type File struct {
	Services map[string]*Service `yaml:"services"`
	Secrets  map[string]Secret   `yaml:"secrets"`
	Volumes  map[string]any      `yaml:"volumes"`
	Networks map[string]Network  `yaml:"networks"`
}

// Network is a top-level network.
type Network struct {
	IPAM struct {
		Config []struct {
			Subnet  string `yaml:"subnet"`
			IPRange string `yaml:"ip_range"`
		} `yaml:"config"`
	} `yaml:"ipam"`
}

// Service is one service of a compose file.
type Service struct {
	Name        string       `yaml:"-"`
	Image       string       `yaml:"image"`
	Build       *Build       `yaml:"build"`
	Command     Words        `yaml:"command"`
	Entrypoint  Words        `yaml:"entrypoint"`
	Environment Environment  `yaml:"environment"`
	Secrets     []SecretRef  `yaml:"secrets"`
	DependsOn   DependsOn    `yaml:"depends_on"`
	Healthcheck *Healthcheck `yaml:"healthcheck"`
	Volumes     []Volume     `yaml:"volumes"`
	Profiles    []string     `yaml:"profiles"`
	Restart     string       `yaml:"restart"`
	User        string       `yaml:"user"`
	Ports       []string     `yaml:"ports"`
	Networks    Networks     `yaml:"networks"`
	// StopGracePeriod is how long compose waits after SIGTERM before it
	// kills the container ("" : compose's default, 10s).
	StopGracePeriod string `yaml:"stop_grace_period"`
	// EnvFiles are the files whose variables the container gets.
	EnvFiles EnvFiles `yaml:"env_file"`
	// Logging is where the container's output goes (nil: the daemon's
	// default, json-file without rotation).
	Logging *Logging `yaml:"logging"`
	Deploy  *Deploy  `yaml:"deploy"`
}

// Logging is a service's logging section.
type Logging struct {
	Driver  string            `yaml:"driver"`
	Options map[string]string `yaml:"options"`
}

// Deploy is the part of a service's deploy section the checks read.
type Deploy struct {
	Replicas  *int `yaml:"replicas"`
	Resources struct {
		Reservations struct {
			Devices []struct {
				Driver       string   `yaml:"driver"`
				Capabilities []string `yaml:"capabilities"`
			} `yaml:"devices"`
		} `yaml:"reservations"`
	} `yaml:"resources"`
}

// GPU reports whether the service reserves a GPU.
func (s *Service) GPU() bool {
	if s.Deploy == nil {
		return false
	}
	for _, d := range s.Deploy.Resources.Reservations.Devices {
		if slices.Contains(d.Capabilities, "gpu") {
			return true
		}
	}
	return false
}

// Published is one entry of ports: the host address ("" : every one), the
// host port and the container's port with its protocol.
type Published struct {
	HostIP, HostPort, ContainerPort, Protocol string
}

// Published parses the service's ports (the short syntax:
// [[host_ip:]host_port:]container_port[/protocol]).
func (s *Service) Published() []Published {
	var out []Published
	for _, p := range s.Ports {
		var pub Published
		p, pub.Protocol, _ = strings.Cut(p, "/")
		if pub.Protocol == "" {
			pub.Protocol = "tcp"
		}
		parts := strings.Split(p, ":")
		pub.ContainerPort = parts[len(parts)-1]
		if len(parts) >= 2 {
			pub.HostPort = parts[len(parts)-2]
		}
		if len(parts) >= 3 {
			pub.HostIP = strings.Trim(strings.Join(parts[:len(parts)-2], ":"), "[]")
		}
		out = append(out, pub)
	}
	return out
}

// EnvFile is one entry of env_file: a path, and whether compose fails
// when the file is missing.
type EnvFile struct {
	Path     string
	Required bool
}

// EnvFiles is env_file: a path, a list of paths, or a list of
// {path, required} (required by default).
type EnvFiles []EnvFile

// Networks are the networks a service joins, each with its fixed address
// ("" when it gets one from the network's range): a list, or a mapping.
type Networks map[string]string

// Build is a service's build section.
type Build struct {
	Context    string
	Dockerfile string
	// Target is the Dockerfile stage built ("": the last).
	Target string
	Args   map[string]string
}

// Secret is a top-level secret.
type Secret struct {
	File string `yaml:"file"`
}

// SecretRef is a service's use of a secret.
type SecretRef struct {
	Source, Target string
}

// Path is where the secret is mounted in the container.
func (r SecretRef) Path() string {
	switch {
	case r.Target == "":
		return "/run/secrets/" + r.Source
	case strings.HasPrefix(r.Target, "/"):
		return r.Target
	}
	return "/run/secrets/" + r.Target
}

// Healthcheck is a service's healthcheck.
type Healthcheck struct {
	Test    Words `yaml:"test"`
	Disable bool  `yaml:"disable"`
}

// Volume is one mount of a service.
type Volume struct {
	Type, Source, Target string
}

// Dependency is one entry of depends_on.
type Dependency struct {
	Condition string `yaml:"condition"`
}

// Compose's depends_on conditions.
const (
	Started   = "service_started"
	Healthy   = "service_healthy"
	Completed = "service_completed_successfully"
)

// Words is a command: a list, or a string split at spaces.
type Words []string

// Environment is a service's environment: a mapping, or a list of K=V.
type Environment map[string]string

// DependsOn is depends_on: a mapping, or a list (condition service_started).
type DependsOn map[string]Dependency

// Load reads and parses the compose file at path, interpolating ${…} from env.
func Load(path string, env map[string]string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, env)
}

// Parse parses a compose file, interpolating ${…} from env.
func Parse(data []byte, env map[string]string) (*File, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	if err := interpolateNode(&root, env, map[*yaml.Node]bool{}); err != nil {
		return nil, err
	}
	var f File
	if err := root.Decode(&f); err != nil {
		return nil, err
	}
	for name, s := range f.Services {
		if s == nil {
			return nil, fmt.Errorf("service %s is empty", name)
		}
		s.Name = name
	}
	return &f, nil
}

// interpolateNode interpolates every scalar value (not mapping keys) once;
// aliases point at nodes already seen.
func interpolateNode(n *yaml.Node, env map[string]string, seen map[*yaml.Node]bool) error {
	if seen[n] {
		return nil
	}
	seen[n] = true
	switch n.Kind {
	case yaml.ScalarNode:
		v, err := Interpolate(n.Value, env)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		n.Value = v
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			if err := interpolateNode(n.Content[i], env, seen); err != nil {
				return err
			}
		}
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			if err := interpolateNode(c, env, seen); err != nil {
				return err
			}
		}
	case yaml.AliasNode:
		return interpolateNode(n.Alias, env, seen)
	}
	return nil
}

// BuiltFrom returns the services built from dockerfile, sorted by name.
func (f *File) BuiltFrom(dockerfile string) []*Service {
	var out []*Service
	for _, s := range f.Services {
		if s.Build != nil && s.Build.Dockerfile == dockerfile {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Sorted returns the services sorted by name.
func (f *File) Sorted() []*Service {
	out := make([]*Service, 0, len(f.Services))
	for _, s := range f.Services {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// OneShot reports whether the service runs once (restart "no"): a job such
// as migrate, which others wait for with service_completed_successfully.
func (s *Service) OneShot() bool { return s.Restart == "no" }

// Ref is what a service runs: its image, or build:<SERVICE arg> for one
// built from the repository.
func (s *Service) Ref() string {
	if s.Build != nil {
		return "build:" + s.Build.Args["SERVICE"]
	}
	return s.Image
}

func (b *Build) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		b.Context = n.Value
		return nil
	}
	var raw struct {
		Context    string    `yaml:"context"`
		Dockerfile string    `yaml:"dockerfile"`
		Target     string    `yaml:"target"`
		Args       yaml.Node `yaml:"args"`
	}
	if err := n.Decode(&raw); err != nil {
		return err
	}
	b.Context, b.Dockerfile, b.Target = raw.Context, raw.Dockerfile, raw.Target
	if b.Dockerfile == "" {
		b.Dockerfile = "Dockerfile"
	}
	var args Environment
	if raw.Args.Kind != 0 {
		if err := args.UnmarshalYAML(&raw.Args); err != nil {
			return fmt.Errorf("build args: %w", err)
		}
	}
	b.Args = args
	return nil
}

func (w *Words) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*w = strings.Fields(n.Value)
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*w = list
	return nil
}

func (e *Environment) UnmarshalYAML(n *yaml.Node) error {
	out := Environment{}
	if n.Kind == yaml.SequenceNode {
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		for _, kv := range list {
			k, v, _ := strings.Cut(kv, "=")
			out[k] = v
		}
		*e = out
		return nil
	}
	var m map[string]*string
	if err := n.Decode(&m); err != nil {
		return err
	}
	for k, v := range m {
		if v != nil {
			out[k] = *v
		} else {
			out[k] = ""
		}
	}
	*e = out
	return nil
}

func (e *EnvFiles) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*e = EnvFiles{{Path: n.Value, Required: true}}
		return nil
	}
	var items []yaml.Node
	if err := n.Decode(&items); err != nil {
		return err
	}
	out := EnvFiles{}
	for _, it := range items {
		f := EnvFile{Required: true}
		if it.Kind == yaml.ScalarNode {
			f.Path = it.Value
		} else {
			var raw struct {
				Path     string `yaml:"path"`
				Required *bool  `yaml:"required"`
			}
			if err := it.Decode(&raw); err != nil {
				return err
			}
			f.Path = raw.Path
			if raw.Required != nil {
				f.Required = *raw.Required
			}
		}
		out = append(out, f)
	}
	*e = out
	return nil
}

func (ns *Networks) UnmarshalYAML(n *yaml.Node) error {
	out := Networks{}
	if n.Kind == yaml.SequenceNode {
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		for _, name := range list {
			out[name] = ""
		}
		*ns = out
		return nil
	}
	var m map[string]*struct {
		IPv4Address string `yaml:"ipv4_address"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	for k, v := range m {
		if v != nil {
			out[k] = v.IPv4Address
		} else {
			out[k] = ""
		}
	}
	*ns = out
	return nil
}

func (d *DependsOn) UnmarshalYAML(n *yaml.Node) error {
	out := DependsOn{}
	if n.Kind == yaml.SequenceNode {
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		for _, name := range list {
			out[name] = Dependency{Condition: Started}
		}
		*d = out
		return nil
	}
	var m map[string]Dependency
	if err := n.Decode(&m); err != nil {
		return err
	}
	for k, v := range m {
		if v.Condition == "" {
			v.Condition = Started
		}
		out[k] = v
	}
	*d = out
	return nil
}

func (r *SecretRef) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		r.Source = n.Value
		return nil
	}
	var raw struct {
		Source string `yaml:"source"`
		Target string `yaml:"target"`
	}
	if err := n.Decode(&raw); err != nil {
		return err
	}
	r.Source, r.Target = raw.Source, raw.Target
	return nil
}

func (v *Volume) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		parts := strings.Split(n.Value, ":")
		switch len(parts) {
		case 1:
			v.Type, v.Target = "volume", parts[0]
			return nil
		default:
			v.Source, v.Target = parts[0], parts[1]
		}
		if strings.HasPrefix(v.Source, ".") || strings.HasPrefix(v.Source, "/") || strings.HasPrefix(v.Source, "~") {
			v.Type = "bind"
		} else {
			v.Type = "volume"
		}
		return nil
	}
	var raw struct {
		Type   string `yaml:"type"`
		Source string `yaml:"source"`
		Target string `yaml:"target"`
	}
	if err := n.Decode(&raw); err != nil {
		return err
	}
	v.Type, v.Source, v.Target = raw.Type, raw.Source, raw.Target
	return nil
}
