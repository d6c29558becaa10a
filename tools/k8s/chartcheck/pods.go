package main

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// podsCmd prints, as a YAML stream, one Pod per workload (Deployment,
// StatefulSet, Job) of a rendered chart, made of the workload's pod template:
// the API server enforces Pod Security admission on Pods only (workloads get
// warnings), so make k8s-check dry-runs these too. A StatefulSet's claim
// templates become persistentVolumeClaim volumes of the first replica.
func podsCmd(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var out []string
	for _, doc := range splitDocs(string(raw)) {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		kind, _ := o["kind"].(string)
		if kind != "Deployment" && kind != "StatefulSet" && kind != "Job" {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		spec, _ := o["spec"].(map[string]any)
		tmpl, _ := spec["template"].(map[string]any)
		tmeta, _ := tmpl["metadata"].(map[string]any)
		pspec, _ := tmpl["spec"].(map[string]any)
		if pspec == nil {
			return fmt.Errorf("%s %v: no pod template", kind, meta["name"])
		}
		name := fmt.Sprintf("%v", meta["name"])
		if kind == "StatefulSet" {
			vols, _ := pspec["volumes"].([]any)
			cts, _ := spec["volumeClaimTemplates"].([]any)
			for _, ct := range cts {
				cm, _ := ct.(map[string]any)["metadata"].(map[string]any)
				claim := fmt.Sprintf("%v", cm["name"])
				vols = append(vols, map[string]any{
					"name":                  claim,
					"persistentVolumeClaim": map[string]any{"claimName": claim + "-" + name + "-0"},
				})
			}
			pspec["volumes"] = vols
		}
		if kind == "Job" && pspec["restartPolicy"] == nil {
			pspec["restartPolicy"] = "Never"
		}
		pod := map[string]any{
			"apiVersion": "v1",
			"kind":       "Pod",
			"metadata": map[string]any{
				"name":      strings.ToLower(kind) + "-" + name,
				"namespace": meta["namespace"],
				"labels":    tmeta["labels"],
			},
			"spec": pspec,
		}
		b, err := yaml.Marshal(pod)
		if err != nil {
			return err
		}
		out = append(out, string(b))
	}
	if len(out) == 0 {
		return fmt.Errorf("%s: no workload", path)
	}
	fmt.Print(strings.Join(out, "---\n"))
	return nil
}
