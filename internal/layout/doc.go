// Package layout holds no code: its test keeps the import rules of the
// Layout table in README.md. Every package of the module is in that table
// with what it may import; the test runs "go list" over the module and
// fails on an import the table does not allow, on a package the table does
// not name, and when the README's table and the test's rules differ.
//
// The rules:
//
//   - wire imports only the standard library;
//   - nothing outside tools/ and cmd/ imports tools/ (tests included, but
//     for the end-to-end tests of internal/e2e, which drive the
//     applications too);
//   - every package has a rank, and a package imports only packages of a
//     lower rank: helpers, then wire and the roles in the order nak <
//     journal, retransmit, fetch < publisher, subscriber < resume, replay <
//     recorder < bench < tools/ < commands;
//   - the test helpers (internal/netlab, internal/labtest) are imported only
//     by tests and commands.
package layout
