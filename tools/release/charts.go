package main

import (
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// chartNames are the Helm charts a release packages (charts/<name>).
var chartNames = []string{"konnector", "backend", "consumer-access"}

// packageChart runs what `helm package --version V --app-version A` runs
// (Helm v4, pinned in go.mod) with every file time the release's, so the
// archive is the same bytes on every machine.
func packageChart(dir, out, version, appVersion string, epoch time.Time) (string, error) {
	p := action.NewPackage()
	p.Version, p.AppVersion, p.Destination = version, appVersion, out
	p.SourceDateEpoch = &epoch
	file, err := p.Run(dir, nil)
	if err != nil {
		return "", fmt.Errorf("helm package %s: %w", dir, err)
	}
	return file, nil
}

// chartVersions reads back what a packaged chart says it is.
func chartVersions(file, name string) ([]stamped, error) {
	ch, err := loader.Load(file)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", file, err)
	}
	return []stamped{
		{"chart " + name + " version", ch.Metadata.Version},
		{"chart " + name + " appVersion (as a version)", untag(ch.Metadata.AppVersion)},
	}, nil
}
