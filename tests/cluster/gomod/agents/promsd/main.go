// Test-rig only: runs Prometheus' own Kubernetes service discovery (discovery/kubernetes, its
// Discoverer as the prometheus binary runs it) for each kubernetes_sd_configs entry of a
// Prometheus-style config, and keeps the current target groups of every job in a JSON file.
//
// Usage: promsd -config FILE -out FILE
//
// The config is the scrape_configs part of prometheus.yml:
//
//	scrape_configs:
//	- job_name: pods
//	  kubernetes_sd_configs:
//	  - {role: pod, api_server: https://..., bearer_token_file: ..., tls_config: {ca_file: ...},
//	     selectors: [{role: pod, field: spec.nodeName=NODE}]}
//
// After each update, -out is replaced (write then rename) with
// {"updates": N, "jobs": {JOB: {SOURCE: {"labels": {...}, "targets": [{...}, ...]}}}}:
// every group the discovery last sent, empty groups left out (a deleted object's group).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"go.yaml.in/yaml/v2"
)

type scrapeConfig struct {
	JobName string                 `yaml:"job_name"`
	SD      []*kubernetes.SDConfig `yaml:"kubernetes_sd_configs"`
}

type group struct {
	Labels  model.LabelSet   `json:"labels"`
	Targets []model.LabelSet `json:"targets"`
}

type state struct {
	sync.Mutex
	path    string
	updates int
	jobs    map[string]map[string]group
}

func (s *state) apply(job string, groups []*targetgroup.Group) error {
	s.Lock()
	defer s.Unlock()
	for _, g := range groups {
		if g == nil {
			continue
		}
		if len(g.Targets) == 0 {
			delete(s.jobs[job], g.Source)
			continue
		}
		s.jobs[job][g.Source] = group{Labels: g.Labels, Targets: g.Targets}
	}
	s.updates++
	data, err := json.Marshal(map[string]any{"updates": s.updates, "jobs": s.jobs})
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

func main() {
	configPath := flag.String("config", "", "Prometheus-style config with scrape_configs")
	out := flag.String("out", "", "JSON file kept with the current target groups")
	flag.Parse()
	if err := run(*configPath, *out); err != nil {
		fmt.Fprintln(os.Stderr, "promsd:", err)
		os.Exit(1)
	}
}

func run(configPath, out string) error {
	raw, err := os.ReadFile(configPath)
	if err != nil {
		return err
	}
	var cfg struct {
		ScrapeConfigs []scrapeConfig `yaml:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	reg := prometheus.NewRegistry()
	refresh := discovery.NewRefreshMetrics(reg)
	s := &state{path: out, jobs: map[string]map[string]group{}}
	errs := make(chan error, 1)
	for _, sc := range cfg.ScrapeConfigs {
		s.jobs[sc.JobName] = map[string]group{}
		for i, sd := range sc.SD {
			sd.SetDirectory(filepath.Dir(configPath))
			metrics := sd.NewDiscovererMetrics(prometheus.WrapRegistererWith(
				prometheus.Labels{"job": sc.JobName, "sd": fmt.Sprint(i)}, reg), refresh)
			if err := metrics.Register(); err != nil {
				return err
			}
			d, err := sd.NewDiscoverer(discovery.DiscovererOptions{Logger: logger, Metrics: metrics})
			if err != nil {
				return err
			}
			ch := make(chan []*targetgroup.Group)
			go d.Run(ctx, ch)
			go func(job string) {
				for {
					select {
					case <-ctx.Done():
						return
					case groups := <-ch:
						if err := s.apply(job, groups); err != nil {
							select {
							case errs <- err:
							default:
							}
						}
					}
				}
			}(sc.JobName)
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}
