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

// Package gettingstarted follows docs/getting-started.md: it runs the
// page's command blocks marked for testing, in order, with bash, real
// kubectl, the built kubectl-kbind and Helm's own install code, against a
// provider and a consumer API server, and checks after each step what the
// page says happens (see TestGettingStarted for the convention).
package gettingstarted
