// Package validate checks the demo stack's configuration offline, with no
// container engine: docker-compose.yml at the repository root, the
// OpenTelemetry Collector, Prometheus and Grafana files in
// examples/otel-collector, and how their hosts, ports and paths line up.
// Its tests are the checks; this file holds the loaders they share.
//
// It is a module of its own so compose-go never enters gotry's go.mod.
package validate

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

// Paths of the stack's files, relative to the repository root.
const (
	ComposeFile     = "docker-compose.yml"
	CollectorFile   = "examples/otel-collector/otel-collector.yaml"
	PrometheusFile  = "examples/otel-collector/prometheus.yml"
	DatasourcesFile = "examples/otel-collector/grafana/provisioning/datasources/datasources.yaml"
	DashboardsFile  = "examples/otel-collector/grafana/provisioning/dashboards/dashboards.yaml"

	// The native stack: Jaeger as the collector, the Debian Prometheus.
	NativeJaegerFile     = "examples/otel-collector/native/jaeger.yaml"
	NativePrometheusFile = "examples/otel-collector/native/prometheus.yml"
	NativeRunScript      = "examples/otel-collector/native/run.sh"
)

// LoadCompose loads a compose file the way `docker compose` does, with
// compose-go: schema validation (unknown keys are errors), interpolation,
// normalization and the consistency checks (depends_on, networks, volumes
// refer to things that exist). Relative paths resolve against workDir.
func LoadCompose(ctx context.Context, file, workDir string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{file},
		cli.WithWorkingDirectory(workDir),
		cli.WithName("gotry-demo-validate"),
		cli.WithResolvedPaths(true),
		cli.WithConsistency(true),
	)
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(ctx)
}

// Collector is the part of an OpenTelemetry Collector configuration the
// checks read. Component maps keep every key, so a referenced component can
// be looked up by its full "type/name" id.
type Collector struct {
	Receivers  map[string]any `yaml:"receivers"`
	Processors map[string]any `yaml:"processors"`
	Exporters  map[string]any `yaml:"exporters"`
	Connectors map[string]any `yaml:"connectors"`
	Extensions map[string]any `yaml:"extensions"`
	Service    struct {
		Extensions []string            `yaml:"extensions"`
		Pipelines  map[string]Pipeline `yaml:"pipelines"`
		Telemetry  map[string]any      `yaml:"telemetry"`
	} `yaml:"service"`
}

// Pipeline is one service pipeline.
type Pipeline struct {
	Receivers  []string `yaml:"receivers"`
	Processors []string `yaml:"processors"`
	Exporters  []string `yaml:"exporters"`
}

// Prometheus is the part of a Prometheus configuration the checks read.
type Prometheus struct {
	Global        map[string]any `yaml:"global"`
	RuleFiles     []string       `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		HonorLabels   bool   `yaml:"honor_labels"`
		MetricsPath   string `yaml:"metrics_path"`
		Scheme        string `yaml:"scheme"`
		StaticConfigs []struct {
			Targets []string          `yaml:"targets"`
			Labels  map[string]string `yaml:"labels"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// Datasources is a Grafana data source provisioning file.
type Datasources struct {
	APIVersion  int `yaml:"apiVersion"`
	Datasources []struct {
		Name      string         `yaml:"name"`
		UID       string         `yaml:"uid"`
		Type      string         `yaml:"type"`
		Access    string         `yaml:"access"`
		URL       string         `yaml:"url"`
		IsDefault bool           `yaml:"isDefault"`
		Editable  bool           `yaml:"editable"`
		JSONData  map[string]any `yaml:"jsonData"`
	} `yaml:"datasources"`
}

// DashboardProviders is a Grafana dashboard provisioning file.
type DashboardProviders struct {
	APIVersion int `yaml:"apiVersion"`
	Providers  []struct {
		Name                  string `yaml:"name"`
		Folder                string `yaml:"folder"`
		Type                  string `yaml:"type"`
		DisableDeletion       bool   `yaml:"disableDeletion"`
		AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
		UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
		Options               struct {
			Path                      string `yaml:"path"`
			FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
		} `yaml:"options"`
	} `yaml:"providers"`
}

// ReadYAML decodes file into v, rejecting keys v does not declare (strict
// is for the files whose whole schema v covers).
func ReadYAML(file string, v any, strict bool) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(strict)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// Lookup walks nested maps by keys: Lookup(m, "protocols", "http",
// "endpoint").
func Lookup(v any, keys ...string) (any, bool) {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// LookupString is Lookup for a string leaf.
func LookupString(v any, keys ...string) string {
	x, _ := Lookup(v, keys...)
	s, _ := x.(string)
	return s
}

// envRef is a collector config reference "${env:NAME:-default}".
var envRef = regexp.MustCompile(`\$\{env:[A-Za-z_][A-Za-z0-9_]*:-([^}]*)\}`)

// EnvDefaults replaces each "${env:NAME:-default}" in s by its default, as
// the collector resolves it when NAME is unset.
func EnvDefaults(s string) string { return envRef.ReplaceAllString(s, "$1") }

// HostPort splits "host:port" (a listen address or target) into host and
// numeric port.
func HostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port of %q: %w", addr, err)
	}
	return h, n, nil
}

// URLHostPort returns the host and port of an http(s) URL, the port
// defaulting to the scheme's.
func URLHostPort(raw string) (string, int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", 0, err
	}
	if u.Port() == "" {
		switch u.Scheme {
		case "http":
			return u.Hostname(), 80, nil
		case "https":
			return u.Hostname(), 443, nil
		}
		return "", 0, fmt.Errorf("URL %q has no port", raw)
	}
	p, err := strconv.Atoi(u.Port())
	return u.Hostname(), p, err
}

// FlagValue finds a flag's value in a command line: "-name=v", "--name=v",
// "-name v" or "--name v".
func FlagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		trimmed := strings.TrimLeft(a, "-")
		if trimmed == a {
			continue // not a flag
		}
		if v, ok := strings.CutPrefix(trimmed, name+"="); ok {
			return v, true
		}
		if trimmed == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// Published returns the container port of svc published on the host, and
// whether it is published at all.
func Published(svc types.ServiceConfig, containerPort int) (types.ServicePortConfig, bool) {
	for _, p := range svc.Ports {
		if int(p.Target) == containerPort {
			return p, true
		}
	}
	return types.ServicePortConfig{}, false
}

// MountSource returns the host path bind-mounted at target in svc.
func MountSource(svc types.ServiceConfig, target string) (string, bool) {
	for _, v := range svc.Volumes {
		if v.Type == types.VolumeTypeBind && filepath.Clean(v.Target) == filepath.Clean(target) {
			return v.Source, true
		}
	}
	return "", false
}
