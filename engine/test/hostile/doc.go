// Package hostile holds kbind's tests of hostile or odd input from a
// provider (issue "reliability"): CRDs named like core kinds, with a
// hundred versions, with unknown fields kept at the root and at every
// nested level, with a schema as large as the API server stores, that
// change scope; objects at the API server's size limit; and objects in
// 10000 namespaces. Each must give a working sync or a clear condition —
// never a panic, a hot loop or lost data — and leave other bindings
// unaffected. The package has only tests.
package hostile
