// Package hostile holds kbind's tests of hostile or odd input from a
// provider (issue "reliability"): CRDs named like core kinds, with a
// hundred versions, with unknown fields everywhere, that change scope, and
// objects at the API server's size limit. Each must give a working sync or
// a clear condition — never a panic, a hot loop or lost data — and leave
// other bindings unaffected. The package has only tests.
package hostile
