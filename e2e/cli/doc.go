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

// Package cli holds end-to-end tests of the built kubectl-kbind plugin
// (docs/cli.md) against a real provider and consumer: export, the
// two-command onboarding (grant on the provider, apply the bundle on the
// consumer) with a real konnector process, token renewal without a
// restart, revoke, and the refusals.
package cli
