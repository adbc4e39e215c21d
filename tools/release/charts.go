/*
Copyright The kbind Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

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
