// An assembly file, empty: it lets topology.go declare newManagerImpl without a body (go:linkname), which the
// Go compiler accepts only in a package that has one.
