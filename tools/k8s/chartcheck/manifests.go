package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// object is the part of a rendered manifest the policy checks read; the
// schema checks (kubeconform, the API server) cover the rest.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Data       map[string]string `json:"data"`
	StringData map[string]string `json:"stringData"`
	Spec       struct {
		Template struct {
			Spec podSpec `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

type podSpec struct {
	AutomountServiceAccountToken  *bool `json:"automountServiceAccountToken"`
	TerminationGracePeriodSeconds *int  `json:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot   *bool `json:"runAsNonRoot"`
		SeccompProfile struct {
			Type string `json:"type"`
		} `json:"seccompProfile"`
	} `json:"securityContext"`
	Containers []container `json:"containers"`
}

type probe struct {
	HTTPGet struct {
		Path string `json:"path"`
		Port any    `json:"port"`
	} `json:"httpGet"`
}

type container struct {
	Name            string `json:"name"`
	SecurityContext struct {
		RunAsNonRoot             *bool `json:"runAsNonRoot"`
		ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
		Capabilities             struct {
			Drop []string `json:"drop"`
		} `json:"capabilities"`
		SeccompProfile struct {
			Type string `json:"type"`
		} `json:"seccompProfile"`
	} `json:"securityContext"`
	Resources struct {
		Requests map[string]any `json:"requests"`
		Limits   map[string]any `json:"limits"`
	} `json:"resources"`
	LivenessProbe  *probe `json:"livenessProbe"`
	ReadinessProbe *probe `json:"readinessProbe"`
	StartupProbe   *probe `json:"startupProbe"`
	Env            []struct {
		Name      string `json:"name"`
		Value     string `json:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `json:"name"`
			} `json:"secretKeyRef"`
		} `json:"valueFrom"`
	} `json:"env"`
	VolumeMounts []struct {
		MountPath string `json:"mountPath"`
	} `json:"volumeMounts"`
}

// credentialEnv names variables that must come from a Secret (the OTLP
// exporter's headers carry the collector's credentials).
var credentialEnv = regexp.MustCompile(`^(RECEIPTS_(PG_URL|REDIS_URL|.*PASSWORD.*|.*TOKEN)|OTEL_EXPORTER_OTLP(_TRACES)?_HEADERS)$`)

// credentialText spots a password in a URL or a key that names one.
var credentialText = regexp.MustCompile(`(?i)://[^/\s:@]+:[^/\s@]+@|password|secret_?key|token`)

// drainBound is the longest drain a binary is configured with by default
// (persister --drain-timeout, kafkagate --shutdown-timeout: 10 s); the grace
// period must leave room beyond it.
const drainBound = 10

// closeMargin is what a stop takes beyond the configured delay and drain:
// the spool replayer's and the producer's close, the admin port's.
const closeMargin = 5 * time.Second

// stopEnv are the environment variables whose durations add up to a
// container's stop: kafkagate's shutdown delay (serving on, unready) and
// drain, the persister's and reconciler's drain.
var stopEnv = []string{"RECEIPTS_SHUTDOWN_DELAY", "RECEIPTS_SHUTDOWN_TIMEOUT", "RECEIPTS_DRAIN_TIMEOUT"}

// stopNeeds is how long a container's configured stop takes at most (the
// stopEnv durations plus closeMargin), or 0 when it sets none of them.
func stopNeeds(c container) (time.Duration, error) {
	var total time.Duration
	for _, e := range c.Env {
		if !slices.Contains(stopEnv, e.Name) || e.ValueFrom != nil {
			continue
		}
		d, err := time.ParseDuration(e.Value)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", e.Name, err)
		}
		total += d
	}
	if total == 0 {
		return 0, nil
	}
	return total + closeMargin, nil
}

func checkManifests(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var problems []string
	workloads := 0
	for _, doc := range splitDocs(string(raw)) {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		where := o.Kind + " " + o.Metadata.Name
		add := func(f string, a ...any) { problems = append(problems, where+": "+fmt.Sprintf(f, a...)) }
		switch o.Kind {
		case "ConfigMap":
			for k, v := range o.Data {
				if k == "receipts.json" { // the dashboard: queries, no credentials
					continue
				}
				if credentialText.MatchString(k) || credentialText.MatchString(v) {
					add("key %s looks like a credential: credentials belong in Secrets", k)
				}
			}
		case "Deployment", "StatefulSet", "Job":
			workloads++
			ps := o.Spec.Template.Spec
			isJob := o.Kind == "Job"
			if ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot {
				add("pod securityContext.runAsNonRoot is not true")
			}
			if ps.SecurityContext.SeccompProfile.Type != "RuntimeDefault" {
				add("pod seccompProfile is not RuntimeDefault")
			}
			if ps.AutomountServiceAccountToken == nil {
				add("automountServiceAccountToken is not set explicitly")
			}
			if !isJob {
				if ps.TerminationGracePeriodSeconds == nil || *ps.TerminationGracePeriodSeconds <= 2*drainBound {
					add("terminationGracePeriodSeconds must exceed twice the %d s drain", drainBound)
				}
			}
			if len(ps.Containers) == 0 {
				add("no container")
			}
			for _, c := range ps.Containers {
				cw := "container " + c.Name
				sc := c.SecurityContext
				if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
					add("%s: readOnlyRootFilesystem is not true", cw)
				}
				if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					add("%s: allowPrivilegeEscalation is not false", cw)
				}
				if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
					add("%s: runAsNonRoot is not true", cw)
				}
				if len(c.SecurityContext.Capabilities.Drop) != 1 || c.SecurityContext.Capabilities.Drop[0] != "ALL" {
					add("%s: capabilities.drop is not [ALL]", cw)
				}
				if sc.SeccompProfile.Type != "RuntimeDefault" {
					add("%s: seccompProfile is not RuntimeDefault", cw)
				}
				if c.Resources.Requests["cpu"] == nil || c.Resources.Requests["memory"] == nil || c.Resources.Limits["memory"] == nil {
					add("%s: needs cpu and memory requests and a memory limit", cw)
				}
				tmp := false
				for _, m := range c.VolumeMounts {
					tmp = tmp || m.MountPath == "/tmp"
				}
				if !tmp {
					add("%s: no writable /tmp mount (the root filesystem is read-only)", cw)
				}
				if !isJob && ps.TerminationGracePeriodSeconds != nil {
					need, err := stopNeeds(c)
					if err != nil {
						add("%s: %v", cw, err)
					} else if grace := time.Duration(*ps.TerminationGracePeriodSeconds) * time.Second; grace < need {
						add("%s: terminationGracePeriodSeconds (%s) is shorter than its stop (%s: %s, plus %s to close)", cw, grace, strings.Join(stopEnv, " + "), need-closeMargin, closeMargin)
					}
				}
				if !isJob {
					if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
						add("%s: livenessProbe is not GET /healthz", cw)
					}
					if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
						add("%s: readinessProbe is not GET /readyz", cw)
					}
					if c.StartupProbe == nil {
						add("%s: no startupProbe", cw)
					}
				}
				for _, e := range c.Env {
					if credentialEnv.MatchString(e.Name) && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) && !strings.HasSuffix(e.Name, "_FILE") {
						add("%s: %s must come from a Secret (secretKeyRef)", cw, e.Name)
					}
					if e.ValueFrom == nil && credentialText.MatchString(e.Value) && !strings.HasSuffix(e.Name, "_FILE") {
						add("%s: %s has a literal value that looks like a credential", cw, e.Name)
					}
				}
			}
		}
	}
	if workloads == 0 {
		problems = append(problems, path+": no workload to check")
	}
	return problems, nil
}

func splitDocs(s string) []string {
	var docs []string
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(s, -1) {
		if strings.TrimSpace(d) != "" && !allComments(d) {
			docs = append(docs, d)
		}
	}
	return docs
}

func allComments(doc string) bool {
	for _, l := range strings.Split(doc, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}
