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

// Package hostile holds kbind's tests of hostile or odd input from a
// provider (issue "reliability"): CRDs named like core kinds, with a
// hundred versions, with unknown fields kept at the root and at every
// nested level, with a schema as large as the API server stores, that
// change scope; objects at the API server's size limit; and objects in
// 10000 namespaces. Each must give a working sync or a clear condition —
// never a panic, a hot loop or lost data — and leave other bindings
// unaffected. The package has only tests.
package hostile
